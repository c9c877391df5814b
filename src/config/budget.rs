//! How large a result may be: the transport's byte limit and what Claude's clients hand the
//! model, as one budget the tools shape their results to.

use super::Settings;

/// Smallest result budget that still leaves room for a useful answer.
const MIN_RESULT_BYTES: usize = 64 << 10;

impl Settings {
    /// What a whole result may take, serialized: within the transport's byte limit and what
    /// Claude's clients hand the model (a serialized result has at least as many bytes as
    /// characters, so a result within it is within both). Never below what a short answer
    /// and a small figure need.
    pub fn result_budget(&self) -> usize {
        self.result_bytes.min(self.result_chars).max(MIN_RESULT_BYTES)
    }

    /// The largest serialized message the transport sends.
    pub fn transport_budget(&self) -> usize {
        self.result_bytes.max(MIN_RESULT_BYTES)
    }

    /// The limit [`Self::result_budget`] comes from, as a message names it.
    pub fn result_limit(&self) -> String {
        let budget = self.result_budget();
        if self.result_chars < self.result_bytes {
            format!("the {budget}-character result limit (CODE_SANDBOX_RESULT_CHARS, what Claude takes)")
        } else {
            format!("the {budget} byte result limit (CODE_SANDBOX_RESULT_BYTES)")
        }
    }
}
