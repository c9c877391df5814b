//! An interpreter's state between turns, saved and brought back: the pages that differ from
//! its image's initial memory, and a Store started again from them.

use super::*;

impl Session {
    pub(super) async fn restore(
        program: &Arc<Program>,
        cfg: &SessionConfig,
        saved: &SavedState,
        base: Option<&[u8]>,
        reseed: bool,
    ) -> Result<Session, SessionError> {
        let offset = Duration::from_nanos(saved.header.clock_ns);
        let mut session = Self::instantiate(program, cfg, offset).await?;
        let start = |e: wasmtime::Error| SessionError::Start(format!("{e:#}"));
        let have = session.memory.data_size(&session.store) as u64;
        let want = saved.header.memory_bytes.max(base.map_or(0, |b| b.len() as u64));
        if want > have {
            // memory.grow counts WebAssembly pages of 64 KiB.
            let grow = (want - have).div_ceil(WASM_PAGE);
            // Async: the budget may first suspend idle sandboxes to make room.
            if let Err(e) = session.memory.grow_async(&mut session.store, grow).await {
                return Err(if session.store.data_mut().limits.take_budget_refusal() {
                    SessionError::BudgetFull
                } else {
                    start(e)
                });
            }
        }
        let data = session.memory.data_mut(&mut session.store);
        let laid = base.into_iter().map(|b| (0, b)).chain(saved.pages());
        for (at, page) in laid {
            let Some(dst) = data.get_mut(at..at + page.len()) else {
                return Err(SessionError::Start(
                    "the saved state does not fit the memory".into(),
                ));
            };
            dst.copy_from_slice(page);
        }
        for (name, value) in &saved.header.globals {
            let global = session
                .instance
                .get_global(&mut session.store, name)
                .ok_or_else(|| SessionError::Start(format!("the image has no global {name}")))?;
            let v = match *value {
                GlobalValue::I32(v) => Val::I32(v),
                GlobalValue::I64(v) => Val::I64(v),
                GlobalValue::F32(v) => Val::F32(v),
                GlobalValue::F64(v) => Val::F64(v),
            };
            global.set(&mut session.store, v).map_err(start)?;
        }
        session.reread_preopens().await?;
        session.first_turn(&super::super::upgrade::upgrade_turn()).await?;
        if reseed {
            session.first_turn(REBIRTH).await?;
        }
        Ok(session)
    }

    /// This interpreter's state between turns, as the pages that differ from its image's
    /// initial memory. Refused while the guest holds files open: a new Store could not give it
    /// the same descriptors.
    pub async fn capture(&mut self) -> Result<SavedState, SessionError> {
        if self.store.data().fs.opened() > 0 {
            // If the code broke the hook, the count below still tells the user what to close.
            let _ = self
                .turn(RELEASE, Duration::from_secs(5), None, &CancellationToken::new())
                .await;
        }
        let opened = self.store.data().fs.opened();
        if opened > 0 {
            let names = self
                .store
                .data()
                .fs
                .open_paths()
                .into_iter()
                .filter_map(|p| self.guest_path(&p))
                .collect();
            return Err(SessionError::OpenFiles(OpenFiles { count: opened, names }));
        }
        let names: Vec<String> = self
            .instance
            .exports(&mut self.store)
            .filter(|e| e.name().starts_with("__wizer_global_"))
            .map(|e| e.name().to_string())
            .collect();
        let mut globals = Vec::new();
        for name in names {
            let Some(g) = self.instance.get_global(&mut self.store, &name) else {
                continue;
            };
            let v = match g.get(&mut self.store) {
                Val::I32(v) => GlobalValue::I32(v),
                Val::I64(v) => GlobalValue::I64(v),
                Val::F32(v) => GlobalValue::F32(v),
                Val::F64(v) => GlobalValue::F64(v),
                _ => return Err(SessionError::Start(format!("global {name} cannot be saved"))),
            };
            globals.push((name, v));
        }
        let clock = self.clock_offset + self.clock_start.elapsed();
        let clock_ns = u64::try_from(clock.as_nanos()).unwrap_or(u64::MAX);
        let base = self.program.base_memory().await?;
        Ok(SavedState::diff(
            &self.program.id,
            self.memory.data(&self.store),
            &base,
            clock_ns,
            globals,
        ))
    }

    /// Where the guest sees a host path in its writable folders.
    fn guest_path(&self, host: &std::path::Path) -> Option<String> {
        for (root, guest) in [(&self.folders.0, WORKSPACE), (&self.folders.1, "/tmp")] {
            let root = root.canonicalize().unwrap_or_else(|_| root.clone());
            if let Ok(rest) = host.strip_prefix(&root) {
                return Some(
                    format!("{guest}/{}", rest.display())
                        .trim_end_matches('/')
                        .to_string(),
                );
            }
        }
        None
    }
}
