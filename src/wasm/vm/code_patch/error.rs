//! What can go wrong rewriting the runtime: each error says what to do.

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("the runtime module could not be read: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error(
        "the runtime names no function {0} (or more than one): it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    NoFunction(&'static str),
    #[error(
        "the runtime holds no string {0:?}: it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    NoString(&'static str),
    #[error("the runtime has no function type a helper needs ({0}): a bug in the rewrite table")]
    NoType(&'static str),
    #[error(
        "{function} in the runtime holds {found} of the instructions to change ({why}), not {expected}: it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    Mismatch {
        function: &'static str,
        why: &'static str,
        found: usize,
        expected: usize,
    },
    #[error("the runtime has no function, global or code section to add to: it is not the pinned runtime")]
    NoSection,
    #[error("the rewrite of {0} is longer than what it replaces (a bug in the rewrite table)")]
    TooLong(&'static str),
    #[error("the rewritten runtime is not a valid module: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}
