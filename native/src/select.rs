//! The top candidates of a decision's reason (streams/core/scheduler.py, `_reason`).
//!
//! Why in the core: the rule must be exact. Until engine version 2 the reason took
//! numpy's `argpartition`, whose choice among tied totals depends on the CPU's vector
//! instructions (AVX-512, AVX2 or none pick different nodes from the same array), so a
//! log recorded on one machine did not replay EQUAL on another. Ties are the rule, not
//! the exception: a cluster holds many identical nodes. Here the k best are chosen by
//! total (highest first), then rank (lowest first), then node slot (lowest first), in
//! one pass: no sort of the whole batch, which at 20,000 nodes was most of a placement.

use std::borrow::Cow;

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Does node `a` come before node `b` in a reason: a higher total, then a lower rank,
/// then a lower slot. Totals are finite here.
fn before(total: &[f64], rank: &[i64], a: usize, b: usize) -> bool {
    let (ta, tb) = (total[a], total[b]);
    ta > tb || (ta == tb && (rank[a], a) < (rank[b], b))
}

/// The `k` best slots among those with a finite total, best first; `total` and `rank`
/// per slot (the same length).
pub(crate) fn best_k(total: &[f64], rank: &[i64], k: usize) -> Vec<usize> {
    let mut best: Vec<usize> = Vec::with_capacity(k + 1);
    if k == 0 {
        return best;
    }
    for v in 0..total.len() {
        if !total[v].is_finite() {
            continue;
        }
        if best.len() == k && !before(total, rank, v, best[k - 1]) {
            continue;
        }
        // Slots come in increasing order, so among equals the later one goes last.
        let at = best.partition_point(|&b| before(total, rank, b, v));
        best.insert(at, v);
        best.truncate(k);
    }
    best
}

/// `best_k` for Python: `total` (float64) and `rank` (int64) per node slot.
#[pyfunction]
pub fn top_k(
    total: PyReadonlyArray1<f64>,
    rank: PyReadonlyArray1<i64>,
    k: usize,
) -> PyResult<Vec<usize>> {
    if total.len() != rank.len() {
        return Err(PyValueError::new_err(format!(
            "top_k: {} totals but {} ranks (one of each per node)",
            total.len(),
            rank.len()
        )));
    }
    // The caller's arrays are contiguous (slices of the scheduler's columns); a strided
    // one is copied rather than refused.
    let total = total
        .as_slice()
        .map(Cow::Borrowed)
        .unwrap_or_else(|_| Cow::Owned(total.as_array().to_vec()));
    let rank =
        rank.as_slice().map(Cow::Borrowed).unwrap_or_else(|_| Cow::Owned(rank.as_array().to_vec()));
    Ok(best_k(&total, &rank, k))
}
