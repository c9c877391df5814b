//! What operators see: Prometheus metrics ([`metrics`]), log lines no caller can forge
//! ([`log_safe`]), and text with the credentials URLs may carry taken out ([`redact`]).

pub mod log_safe;
pub mod metrics;
pub mod redact;
