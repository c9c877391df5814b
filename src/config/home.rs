//! Where the server keeps what it keeps: its home folder, the tokens file, and how much disk
//! kept sandboxes may take there.

use std::path::PathBuf;

use super::Settings;

impl Settings {
    /// `CODE_SANDBOX_HOME`, or the platform's data folder for this program.
    pub fn home_dir(&self) -> PathBuf {
        if let Some(home) = &self.home {
            return home.clone();
        }
        directories::ProjectDirs::from("dev", "mcp-code-sandbox", "mcp-code-sandbox")
            // Local, not roaming: the runtime and sandboxes are hundreds of MB of this machine's.
            .map(|d| d.data_local_dir().to_path_buf())
            .unwrap_or_else(|| std::env::temp_dir().join("mcp-code-sandbox"))
    }

    /// The tokens file: `CODE_SANDBOX_TOKENS`, else `tokens` under the home folder (where
    /// `token add` writes when none is named).
    /// The tokens file `http` serves with: the one set, else `<home>/tokens` if it exists.
    pub fn tokens_in_use(&self) -> Option<PathBuf> {
        self.tokens
            .clone()
            .or_else(|| Some(self.tokens_file()).filter(|f| f.exists()))
    }

    pub fn tokens_file(&self) -> PathBuf {
        self.tokens
            .clone()
            .unwrap_or_else(|| self.home_dir().join("tokens"))
    }

    /// The disk kept (suspended) sandboxes may hold: `CODE_SANDBOX_KEEP_MB`, else a tenth of
    /// the disk free now under the home folder, between 256 MiB and 10 GiB. Kept sandboxes are
    /// the cold part of the server's disk: a tenth leaves the rest to live work, to other
    /// programs and to the reserve the host disk budget keeps.
    pub fn keep_bytes(&self) -> u64 {
        const CEILING: u64 = 10 << 30;
        const FLOOR: u64 = 256 << 20;
        match self.keep_mb {
            Some(mb) => mb.saturating_mul(1 << 20),
            None => crate::disk::quota::free_bytes(&self.home_dir())
                .map_or(CEILING, |free| free / 10)
                .clamp(FLOOR, CEILING),
        }
    }
}
