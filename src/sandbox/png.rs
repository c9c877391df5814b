//! What makes bytes a figure: results, notebooks and the view label images `image/png`, and
//! the bytes come from guest code, so each is checked to be a PNG of a sane size before it is
//! called one. A host that trusts the label would hand a client whatever the guest sent.

/// The eight bytes every PNG starts with.
const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
/// Largest figure kept (the guest's own limit for a drawn figure is lower).
pub const MAX_BYTES: usize = 16 << 20;
/// Largest side a header may claim (Claude refuses images over 8000 px; figures are scaled).
const MAX_SIDE: u32 = 16_384;

/// Why bytes are not a figure, said to the model as "An image was dropped: {why}".
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotAFigure {
    #[error("it is not a PNG (its first bytes are not PNG's signature and header)")]
    NotPng,
    #[error("its header claims {0}x{1} pixels; at most {MAX_SIDE} on a side is kept")]
    Side(u32, u32),
    #[error("it is {0} bytes, over the {MAX_BYTES} byte limit for one figure")]
    Size(usize),
}

/// Width and height of a PNG that may be passed on as `image/png`.
pub fn check(bytes: &[u8]) -> Result<(u32, u32), NotAFigure> {
    if bytes.len() > MAX_BYTES {
        return Err(NotAFigure::Size(bytes.len()));
    }
    // The IHDR chunk comes first: length 13, type, width, height.
    if bytes.len() < 33
        || &bytes[..8] != SIGNATURE
        || bytes[8..12] != [0, 0, 0, 13]
        || &bytes[12..16] != b"IHDR"
    {
        return Err(NotAFigure::NotPng);
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let (w, h) = (be(&bytes[16..20]), be(&bytes[20..24]));
    if w == 0 || h == 0 {
        return Err(NotAFigure::NotPng);
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(NotAFigure::Side(w, h));
    }
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(w: u32, h: u32) -> Vec<u8> {
        let mut b = SIGNATURE.to_vec();
        b.extend([0, 0, 0, 13]);
        b.extend(b"IHDR");
        b.extend(w.to_be_bytes());
        b.extend(h.to_be_bytes());
        b.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn only_pngs_of_a_sane_size_pass() {
        assert_eq!(check(&header(640, 480)), Ok((640, 480)));
        assert_eq!(check(b"<svg onload=alert(1)>"), Err(NotAFigure::NotPng));
        assert_eq!(check(&header(0, 10)), Err(NotAFigure::NotPng));
        assert_eq!(check(&header(100_000, 10)), Err(NotAFigure::Side(100_000, 10)));
        let mut big = header(10, 10);
        big.resize(MAX_BYTES + 1, 0);
        assert_eq!(check(&big), Err(NotAFigure::Size(MAX_BYTES + 1)));
    }
}
