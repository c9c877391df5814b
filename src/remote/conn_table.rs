//! Which connections are open, who proved each, and which to close when a client takes more
//! than its share. Unproven connections (no request on them authenticated yet: health checks,
//! 404s, 401s) are capped in all and per client address, and each closes when its probation
//! ends however much it was answered; proven ones are capped per principal. Past a cap the
//! oldest of the same client goes, never a stranger's, so a flood only ever evicts itself.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// The caps, from `CODE_SANDBOX_HTTP_MAX_CONNECTIONS`.
#[derive(Clone, Copy, Debug)]
pub struct Shares {
    /// Unproven connections in all.
    pub unproven: usize,
    /// Unproven connections of one client address.
    pub unproven_per_address: usize,
    /// Proven connections of one principal.
    pub per_principal: usize,
    /// Proven connections in all: the rest is a reserve that new principals, health checks
    /// and sign-ins always find, however many principals hold their shares.
    pub proven: usize,
}

impl Shares {
    /// A quarter of all connections may be unproven, half of those from one address, and one
    /// principal may hold a quarter: a flood from one address or one principal leaves at
    /// least half the connections to everyone else.
    pub fn of(max_connections: usize) -> Shares {
        let quarter = (max_connections / 4).max(1);
        Shares {
            unproven: quarter,
            unproven_per_address: (quarter / 2).max(1),
            per_principal: quarter,
            proven: max_connections.saturating_sub(quarter).max(1),
        }
    }
}

struct Conn {
    addr: IpAddr,
    proven_by: Option<Arc<str>>,
    close: CancellationToken,
}

/// What happened when a connection was admitted or proven.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Connections closed to make room.
    pub count: usize,
}

#[derive(Default)]
pub struct ConnTable {
    next: u64,
    conns: BTreeMap<u64, Conn>,
}

impl ConnTable {
    /// Admits a connection from `addr` on probation, closing the oldest unproven one of the
    /// same address past its share, else the oldest unproven one past the cap.
    pub fn admit(&mut self, addr: IpAddr, shares: Shares) -> (u64, CancellationToken, Evicted) {
        let mut evicted = Evicted::default();
        while self.unproven(|c| c.addr == addr) >= shares.unproven_per_address
            && self.close_oldest(|c| c.proven_by.is_none() && c.addr == addr)
        {
            evicted.count += 1;
        }
        while self.unproven(|_| true) >= shares.unproven && self.make_room(addr) {
            evicted.count += 1;
        }
        let id = self.next;
        self.next += 1;
        let close = CancellationToken::new();
        self.conns.insert(
            id,
            Conn {
                addr,
                proven_by: None,
                close: close.clone(),
            },
        );
        (id, close, evicted)
    }

    /// The connection answered a request `who` authenticated: it leaves probation, and past
    /// `who`'s share `who`'s oldest other connection closes.
    pub fn prove(&mut self, id: u64, who: &Arc<str>, shares: Shares) -> Evicted {
        let mut evicted = Evicted::default();
        let Some(conn) = self.conns.get_mut(&id) else {
            return evicted;
        };
        if conn.proven_by.is_some() {
            return evicted;
        }
        conn.proven_by = Some(who.clone());
        while self.count(|c| c.proven_by.as_ref() == Some(who)) > shares.per_principal
            && self.close_oldest_but(id, |c| c.proven_by.as_ref() == Some(who))
        {
            evicted.count += 1;
        }
        // Past the proven connections' part, the principal holding most gives one up.
        while self.count(|c| c.proven_by.is_some()) > shares.proven {
            let Some(heaviest) = self.heaviest(|c| c.proven_by.clone()) else {
                break;
            };
            if !self.close_oldest_but(id, |c| c.proven_by.as_ref() == Some(&heaviest)) {
                break;
            }
            evicted.count += 1;
        }
        evicted
    }

    /// The key (address or principal) holding the most connections of those `key_of` keys.
    fn heaviest<K: Ord + Clone>(&self, key_of: impl Fn(&Conn) -> Option<K>) -> Option<K> {
        let mut counts: BTreeMap<K, usize> = BTreeMap::new();
        for c in self.conns.values() {
            if let Some(k) = key_of(c) {
                *counts.entry(k).or_default() += 1;
            }
        }
        counts.into_iter().max_by_key(|(_, n)| *n).map(|(k, _)| k)
    }

    /// Probation is over: closes the connection if nothing on it was authenticated. Whether it
    /// was closed.
    pub fn expire(&mut self, id: u64) -> bool {
        match self.conns.get(&id) {
            Some(c) if c.proven_by.is_none() => {
                c.close.cancel();
                self.conns.remove(&id);
                true
            }
            _ => false,
        }
    }

    /// The connection ended.
    pub fn remove(&mut self, id: u64) {
        self.conns.remove(&id);
    }

    /// Closes the oldest unproven connection of the address holding most of them (the
    /// newcomer's own when it holds as many), to make room for a connection from `newcomer`:
    /// a client churning connections loses its own, never another's that is about to send
    /// its request. Whether there was one.
    pub fn make_room(&mut self, newcomer: IpAddr) -> bool {
        let Some(heaviest) = self.heaviest(|c| c.proven_by.is_none().then_some(c.addr)) else {
            return false;
        };
        let most = self.unproven(|c| c.addr == heaviest);
        let target = if self.unproven(|c| c.addr == newcomer) >= most {
            newcomer
        } else {
            heaviest
        };
        self.close_oldest(|c| c.proven_by.is_none() && c.addr == target)
    }

    fn count(&self, which: impl Fn(&Conn) -> bool) -> usize {
        self.conns.values().filter(|c| which(c)).count()
    }

    fn unproven(&self, which: impl Fn(&Conn) -> bool) -> usize {
        self.count(|c| c.proven_by.is_none() && which(c))
    }

    fn close_oldest(&mut self, which: impl Fn(&Conn) -> bool) -> bool {
        self.close_oldest_but(u64::MAX, which)
    }

    fn close_oldest_but(&mut self, keep: u64, which: impl Fn(&Conn) -> bool) -> bool {
        let Some(id) = self
            .conns
            .iter()
            .find(|(id, c)| **id != keep && which(c))
            .map(|(id, _)| *id)
        else {
            return false;
        };
        if let Some(c) = self.conns.remove(&id) {
            c.close.cancel();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_flooding_address_evicts_only_itself() {
        let shares = Shares::of(40); // 10 unproven, 5 per address, 10 per principal
        let mut t = ConnTable::default();
        let (_, other, _) = t.admit(ip("10.0.0.2"), shares);
        let mut flood = Vec::new();
        for _ in 0..50 {
            flood.push(t.admit(ip("10.0.0.1"), shares).1);
        }
        assert!(!other.is_cancelled(), "the other address's connection stays");
        assert_eq!(flood.iter().filter(|c| !c.is_cancelled()).count(), 5);
    }

    #[test]
    fn a_principal_past_its_share_loses_its_own_oldest() {
        let shares = Shares::of(8); // 2 per principal
        let mut t = ConnTable::default();
        let alice: Arc<str> = Arc::from("alice");
        let bob: Arc<str> = Arc::from("bob");
        let (b, bob_conn, _) = t.admit(ip("10.0.0.3"), shares);
        t.prove(b, &bob, shares);
        let mut mine = Vec::new();
        for _ in 0..5 {
            let (id, close, _) = t.admit(ip("10.0.0.1"), shares);
            t.prove(id, &alice, shares);
            mine.push(close);
        }
        assert!(!bob_conn.is_cancelled());
        assert_eq!(mine.iter().filter(|c| !c.is_cancelled()).count(), 2);
        assert!(!mine[4].is_cancelled(), "the newest stays");
    }

    #[test]
    fn churn_from_one_address_never_closes_anothers_new_connection() {
        let shares = Shares::of(16); // 4 unproven, 2 per address
        let mut t = ConnTable::default();
        for round in 0..20 {
            let (_, mine, _) = t.admit(ip("10.0.2.9"), shares);
            for k in 0..3 {
                t.admit(ip(&format!("10.0.1.{k}")), shares);
                t.admit(ip(&format!("10.0.1.{k}")), shares);
            }
            assert!(!mine.is_cancelled(), "round {round}");
        }
    }

    #[test]
    fn a_reserve_stays_for_new_principals_however_many_hold_their_share() {
        let shares = Shares::of(16); // 4 per principal, 12 proven in all
        let mut t = ConnTable::default();
        for who in ["a", "b", "c", "d"] {
            let who: Arc<str> = Arc::from(who);
            for _ in 0..4 {
                let (id, _, _) = t.admit(ip("10.0.0.1"), shares);
                t.prove(id, &who, shares);
            }
        }
        assert_eq!(t.count(|c| c.proven_by.is_some()), 12);
        assert_eq!(t.count(|_| true), 12, "four left for newcomers");
        let (e, e_close, _) = t.admit(ip("10.0.0.5"), shares);
        t.prove(e, &Arc::from("e"), shares);
        assert!(!e_close.is_cancelled(), "a fifth principal gets in");
        assert_eq!(t.count(|c| c.proven_by.is_some()), 12);
    }

    #[test]
    fn probation_ends_unproven_connections_only() {
        let shares = Shares::of(40);
        let mut t = ConnTable::default();
        let (a, a_close, _) = t.admit(ip("10.0.0.1"), shares);
        let (b, b_close, _) = t.admit(ip("10.0.0.1"), shares);
        t.prove(b, &Arc::from("carol"), shares);
        assert!(t.expire(a));
        assert!(a_close.is_cancelled());
        assert!(!t.expire(b));
        assert!(!b_close.is_cancelled());
    }
}
