//! How a server's shutdown reaches the calls it is answering: the transport says when it
//! stops reading (the input ended, or SIGTERM) and when it stops waiting for answers (the
//! shutdown timeout passed). Listen streams end at the first, since they never finish on
//! their own; calls still running at the second are answered at once with an error, so that
//! nothing below the transport (rmcp waits five more seconds for answers) holds the exit up.

use tokio_util::sync::CancellationToken;

/// The two moments of a shutdown; clones share them.
#[derive(Clone, Default, Debug)]
pub struct Shutdown {
    draining: CancellationToken,
    abandoned: CancellationToken,
}

impl Shutdown {
    /// The transport stopped reading: calls in flight are still answered.
    pub fn drain(&self) {
        self.draining.cancel();
    }

    /// The shutdown timeout passed: calls still running are answered now.
    pub fn abandon(&self) {
        self.draining.cancel();
        self.abandoned.cancel();
    }

    /// Resolves once the transport stopped reading.
    pub async fn draining(&self) {
        self.draining.cancelled().await;
    }

    /// Resolves once calls still running are abandoned.
    pub async fn abandoned(&self) {
        self.abandoned.cancelled().await;
    }
}
