//! What a state saved by an earlier version of this server lacks, added when it is restored.

/// The changes made to packages as they are imported (numpy's native integers, the data files
/// the runtime's build left out), for an interpreter restored from a state an earlier version
/// of this server saved, which lacks them: the same files, run unless they ran.
const UPGRADE: &str = concat!(
    include_str!("../../../runtime/guest/after_import.py"),
    include_str!("../../../runtime/guest/native_ints.py"),
    include_str!("../../../runtime/guest/package_data.py")
);

/// [`UPGRADE`] as one turn that does nothing where the changes are made already, and never
/// fails the restore (the user's code may have broken what it uses).
pub fn upgrade_turn() -> String {
    // The guest sources are ASCII, so Rust's quoting of them is Python's.
    format!(
        "try:\n    if not hasattr(__import__('builtins'), '__code_sandbox_after_import__'):\n        exec({UPGRADE:?}, {{'__builtins__': __import__('builtins')}})\nexcept BaseException:\n    pass\n"
    )
}
