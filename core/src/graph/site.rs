//! What capacity errors report: the op and phase that ran out of arena, and the
//! step's planned bytes and records when the graph was told its plan.

use super::Graph;
use crate::error::{Error, Phase};
use crate::plan::Plan;
use crate::scalar::Scalar;

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// Tells the graph what a whole step needs (from [`Planner::plan`](crate::plan::Planner::plan)),
    /// so that [`Error::ArenaExhausted`] and [`Error::TapeFull`] can say it: "the whole
    /// step needs 52,000 bytes", "the step needs 40" records.
    pub fn set_plan(&mut self, plan: &Plan) {
        self.arena.site.step_bytes = Some(plan.step_bytes);
        self.planned_records = Some(plan.records);
    }

    /// Names the op and phase that allocate next, for [`Error::ArenaExhausted`].
    pub(crate) fn set_site(&mut self, op: &'static str, phase: Phase) {
        self.arena.site.op = op;
        self.arena.site.phase = phase;
    }

    /// The error of a full tape.
    pub(crate) fn tape_full(&self) -> Error {
        Error::TapeFull {
            capacity: N,
            needed: self.planned_records,
        }
    }
}
