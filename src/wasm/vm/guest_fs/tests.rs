//! The shadows on their own: a bare WASI context with one temporary folder preopened, and a
//! tiny module that hands the WASI imports straight back, so each call comes from "the guest"
//! with pointers into real guest memory.

use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use wasmtime::{Engine, Instance, Linker, Memory, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::errno::{FAULT, NOSPC, SUCCESS};
use super::scratch::CHUNK;
use super::{GuestFs, MAX_OPEN, shadow};
use crate::disk::quota::{DiskQuota, ENTRY_COST};

const MFILE: i32 = super::errno::MFILE;
/// Each export calls its import from inside the module: host functions see the guest's
/// memory only through a caller that is a wasm instance.
const WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_unlink_file" (func $unlink (param i32 i32 i32) (result i32)))
  (memory (export "memory") 40)
  (func (export "path_open") (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)
    (call $open (local.get 0) (local.get 1) (local.get 2) (local.get 3) (local.get 4)
                (local.get 5) (local.get 6) (local.get 7) (local.get 8)))
  (func (export "fd_write") (param i32 i32 i32 i32) (result i32)
    (call $write (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "fd_close") (param i32) (result i32) (call $close (local.get 0)))
  (func (export "path_unlink_file") (param i32 i32 i32) (result i32)
    (call $unlink (local.get 0) (local.get 1) (local.get 2))))"#;

/// The folder's descriptor: the first preopen.
const DIR_FD: i32 = 3;
const O_CREAT: i32 = 1;
const O_TRUNC: i32 = 8;
const RIGHTS: i64 = 0x1FFF_FFFF;
// Where the test puts things in guest memory.
const PATH: usize = 1024;
const IOV: usize = 2048;
const OUT: usize = 2056;
const DATA: usize = 4096;

struct Bare {
    wasi: WasiP1Ctx,
    fs: GuestFs,
}

struct Guest {
    store: Store<Bare>,
    instance: Instance,
    memory: Memory,
    quota: Arc<DiskQuota>,
    dir: std::path::PathBuf,
}

impl Guest {
    async fn new(limit: u64) -> Guest {
        let dir = std::env::temp_dir().join(format!("shadow-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let quota = Arc::new(DiskQuota::new(limit));
        let wasi = WasiCtxBuilder::new()
            .preopened_dir(&dir, "/w", FsPerms::ReadWrite)
            .unwrap()
            .build_p1();
        let fs = GuestFs::new(
            quota.clone(),
            vec![(
                Dir::open_ambient_dir(&dir, ambient_authority()).unwrap(),
                super::Folder::Counted,
            )],
        );
        let engine = Engine::new(&crate::wasm::vm::compile::engine_config(false)).unwrap();
        let module = Module::new(&engine, wat::parse_str(WAT).unwrap()).unwrap();
        let mut linker: Linker<Bare> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut Bare| &mut s.wasi).unwrap();
        shadow::add_to_linker(&mut linker, |s: &mut Bare| (&mut s.wasi, &mut s.fs)).unwrap();
        let mut store = Store::new(&engine, Bare { wasi, fs });
        // No epoch ticker runs for this engine: the deadline is never reached.
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = linker.instantiate_async(&mut store, &module).await.unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        Guest {
            store,
            instance,
            memory,
            quota,
            dir,
        }
    }

    fn poke(&mut self, at: usize, bytes: &[u8]) {
        self.memory.write(&mut self.store, at, bytes).unwrap();
    }

    fn peek_u32(&mut self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        self.memory.read(&self.store, at, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    async fn open(&mut self, name: &str, oflags: i32) -> Result<i32, i32> {
        self.poke(PATH, name.as_bytes());
        let f = self
            .instance
            .get_typed_func::<(i32, i32, i32, i32, i32, i64, i64, i32, i32), i32>(
                &mut self.store,
                "path_open",
            )
            .unwrap();
        let args = (
            DIR_FD,
            0,
            PATH as i32,
            name.len() as i32,
            oflags,
            RIGHTS,
            RIGHTS,
            0,
            OUT as i32,
        );
        match f.call_async(&mut self.store, args).await.unwrap() {
            SUCCESS => Ok(self.peek_u32(OUT) as i32),
            e => Err(e),
        }
    }

    /// Writes `len` bytes through one iovec at guest address `data`; (errno, bytes written).
    async fn write(&mut self, fd: i32, data: usize, len: usize) -> (i32, u32) {
        let mut iov = (data as u32).to_le_bytes().to_vec();
        iov.extend((len as u32).to_le_bytes());
        self.poke(IOV, &iov);
        self.poke(OUT, &[0; 4]);
        let f = self
            .instance
            .get_typed_func::<(i32, i32, i32, i32), i32>(&mut self.store, "fd_write")
            .unwrap();
        let rc = f
            .call_async(&mut self.store, (fd, IOV as i32, 1, OUT as i32))
            .await
            .unwrap();
        (rc, self.peek_u32(OUT))
    }

    async fn call1(&mut self, name: &str, fd: i32) -> i32 {
        let f = self
            .instance
            .get_typed_func::<i32, i32>(&mut self.store, name)
            .unwrap();
        f.call_async(&mut self.store, fd).await.unwrap()
    }

    async fn unlink(&mut self, name: &str) -> i32 {
        self.poke(PATH, name.as_bytes());
        let f = self
            .instance
            .get_typed_func::<(i32, i32, i32), i32>(&mut self.store, "path_unlink_file")
            .unwrap();
        f.call_async(&mut self.store, (DIR_FD, PATH as i32, name.len() as i32))
            .await
            .unwrap()
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_write_past_the_quota_stops_where_the_quota_does_and_unlink_gives_it_back() {
    let limit = ENTRY_COST + 1_500_000;
    let mut g = Guest::new(limit).await;
    let fd = g.open("big.bin", O_CREAT | O_TRUNC).await.unwrap();
    assert_eq!(g.quota.used(), ENTRY_COST, "a new name costs one entry");
    let two_pieces = 2 * CHUNK;
    g.poke(DATA, &vec![7u8; two_pieces]);
    let (rc, wrote) = g.write(fd, DATA, two_pieces).await;
    assert_eq!(
        (rc, wrote as usize),
        (SUCCESS, CHUNK),
        "a short write, as on a full disk"
    );
    let on_disk = std::fs::metadata(g.dir.join("big.bin")).unwrap().len();
    assert_eq!(on_disk, u64::from(wrote), "what was reported is what landed");
    assert_eq!(
        g.quota.used(),
        ENTRY_COST + on_disk,
        "the quota counts exactly the file"
    );
    assert_eq!(g.write(fd, DATA, CHUNK).await, (NOSPC, 0), "then ENOSPC");
    assert_eq!(
        g.write(fd, DATA, 1000).await,
        (SUCCESS, 1000),
        "what still fits is written"
    );
    assert_eq!(g.call1("fd_close", fd).await, SUCCESS);
    assert_eq!(g.unlink("big.bin").await, SUCCESS);
    assert_eq!(g.quota.used(), 0, "deleting the file gives everything back");
}

#[tokio::test]
async fn pointers_outside_guest_memory_answer_efault_and_never_trap() {
    let mut g = Guest::new(1 << 20).await;
    let fd = g.open("f.txt", O_CREAT).await.unwrap();
    let (rc, _) = g.write(fd, (40 << 16) - 10, 100).await;
    assert_eq!(rc, FAULT, "an iovec running past the end of memory");
    assert_eq!(
        std::fs::metadata(g.dir.join("f.txt")).unwrap().len(),
        0,
        "nothing was written"
    );
    let f = g
        .instance
        .get_typed_func::<(i32, i32, i32, i32), i32>(&mut g.store, "fd_write")
        .unwrap();
    let rc = f.call_async(&mut g.store, (fd, -8, 1, OUT as i32)).await.unwrap();
    assert_eq!(rc, FAULT, "an iovec array outside memory");
    // The store is still usable after the faults.
    g.poke(DATA, b"hello");
    assert_eq!(g.write(fd, DATA, 5).await, (SUCCESS, 5));
}

#[tokio::test]
async fn the_open_file_cap_holds_and_closing_frees_a_place() {
    let mut g = Guest::new(1 << 30).await;
    let mut fds = Vec::new();
    let refused = loop {
        match g.open(&format!("f{}", fds.len()), O_CREAT).await {
            Ok(fd) => fds.push(fd),
            Err(e) => break e,
        }
        assert!(fds.len() <= MAX_OPEN, "the cap was not enforced");
    };
    assert_eq!(refused, MFILE);
    assert_eq!(fds.len(), MAX_OPEN, "preopens do not count");
    assert_eq!(g.call1("fd_close", fds[0]).await, SUCCESS);
    assert!(
        g.open("again", O_CREAT).await.is_ok(),
        "a closed descriptor frees its place"
    );
}

#[tokio::test]
async fn a_long_run_of_shadowed_writes_never_runs_out_of_host_call_fuel() {
    // wasmtime-wasi charges every byte copied out of guest memory against the Store's host-call
    // fuel (128 MiB); the shadows must grant it afresh for each call, as wiggle's glue does.
    let mut g = Guest::new(1 << 30).await;
    let fd = g.open("long.bin", O_CREAT | O_TRUNC).await.unwrap();
    g.poke(DATA, &vec![1u8; CHUNK]);
    for i in 0..160 {
        assert_eq!(
            g.write(fd, DATA, CHUNK).await,
            (SUCCESS, CHUNK as u32),
            "write {i}"
        );
    }
    let on_disk = std::fs::metadata(g.dir.join("long.bin")).unwrap().len();
    assert_eq!(on_disk, 160 * CHUNK as u64);
}
