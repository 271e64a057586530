//! The scheduler's scoring pass over a batch of nodes, for profiles whose every policy is
//! in the core (streams/core/scheduler.py, `_score_feasible`).
//!
//! For each node of the batch: the resource fit (streams/core/fit.py: CPU and memory, the
//! node healthy, the model allowed, one GPU with the share free or `num_gpu` idle GPUs);
//! the task's options on it (one per node, or one per GPU with the share free, in GPU
//! order); each policy's score of every option and their weighted total; and, for a
//! fractional task, the node's best option (highest total, then the GPU tie-break).
//! Results are the Python path's to the bit: the same feasibility, options, IEEE
//! operations in the same order, and choice among equal totals.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::fragmentation::{FragTable, ScoreSpec, Task};

const MILLI_PER_GPU: i64 = 1000;

/// One policy's part in the total: its weight and how it scores.
enum Term {
    /// FGD or hetsched: F before and after from the table, the spec's formula, and the
    /// scarcity pressure per model column (the last one: no GPU model).
    Frag { table: Py<FragTable>, spec: ScoreSpec, pressure: Option<Vec<f64>> },
    /// BestFit: trunc(100 * (1 - (0.5 * (C - c) / cpu_norm + 0.5 * (T - G) / gpu_norm))).
    BestFit { cpu_norm: f64, gpu_norm: f64 },
    /// Speed: `scale` x the task's told speed on the node's model (per model id; 0 on a
    /// GPU-less node), or 0 everywhere for a task told none.
    Speed { scale: f64, per_model: Option<Vec<f64>> },
    /// Locality: -weight x the capped seconds to bring the task's input to each node
    /// (per node slot), or 0 everywhere for a task without an input location.
    Locality { weight: f64, cost: Option<Vec<f64>> },
}

/// A term as Python describes it (`native_term` of a policy, streams/policies):
/// ("fgd" | "hetsched", table, scale, strand, pressure), ("bestfit", cpu_norm, gpu_norm),
/// ("speed", scale, speed per model id or None) or ("locality", weight per s, capped
/// seconds per node slot or None).
type TermArgs<'py> = (String, Bound<'py, PyAny>);

fn term(kind: &str, args: &Bound<'_, PyAny>) -> PyResult<Term> {
    match kind {
        "fgd" | "hetsched" => {
            #[allow(clippy::type_complexity)]
            let (table, scale, strand, pressure): (
                Py<FragTable>,
                f64,
                Option<(f64, f64)>,
                Option<(f64, Vec<f64>)>,
            ) = args.extract()?;
            let weight = pressure.as_ref().map_or(0.0, |p| p.0);
            let spec = ScoreSpec::new(kind, scale, strand, weight)?;
            Ok(Term::Frag { table, spec, pressure: pressure.map(|p| p.1) })
        }
        "bestfit" => {
            let (cpu_norm, gpu_norm): (f64, f64) = args.extract()?;
            Ok(Term::BestFit { cpu_norm, gpu_norm })
        }
        "speed" => {
            let (scale, per_model): (f64, Option<Vec<f64>>) = args.extract()?;
            Ok(Term::Speed { scale, per_model })
        }
        "locality" => {
            let (weight, cost): (f64, Option<PyReadonlyArray1<f64>>) = args.extract()?;
            let cost = cost.map(|c| c.as_array().to_vec());
            Ok(Term::Locality { weight, cost })
        }
        _ => Err(PyValueError::new_err(format!(
            "policy term {kind:?}: the core scores \"fgd\", \"hetsched\", \"bestfit\", \
             \"speed\" and \"locality\""
        ))),
    }
}

type Scored<'py> = (
    Bound<'py, PyArray1<i64>>,
    Option<Bound<'py, PyArray1<i64>>>,
    Bound<'py, PyArray1<f64>>,
    Vec<Bound<'py, PyArray1<f64>>>,
);

/// Best option of each feasible node of `idx`: (positions in `idx`, GPU or None for one
/// option per node, total, each policy's score), as `_score_feasible` returns them.
///
/// `task` = (cpu milli, memory MiB, GPUs, milli per GPU, fractional, allowed model ids
/// or None); `terms` = (weight, kind, args) per policy, in the profile's order;
/// `least_free`: the GPU tie-break of the profile (else the lowest index); `width`:
/// the state's GPUs per node + 1 (the tie-break's key).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (n, version, cpu_free, mem_free, healthy, model, gpu_free, idx, task, terms,
                    least_free, width))]
pub fn score_feasible<'py>(
    py: Python<'py>,
    n: usize,
    version: PyReadonlyArray1<i64>,
    cpu_free: PyReadonlyArray1<i64>,
    mem_free: PyReadonlyArray1<i64>,
    healthy: PyReadonlyArray1<bool>,
    model: PyReadonlyArray1<i64>,
    gpu_free: PyReadonlyArray2<i64>,
    idx: PyReadonlyArray1<i64>,
    task: (i64, i64, i64, i64, bool, Option<Vec<i64>>),
    terms: Vec<(f64, TermArgs<'py>)>,
    least_free: bool,
    width: i64,
) -> PyResult<Scored<'py>> {
    let (version, cpu, mem) = (version.as_array(), cpu_free.as_array(), mem_free.as_array());
    let (healthy, model, gpus) = (healthy.as_array(), model.as_array(), gpu_free.as_array());
    let idx = idx.as_array();
    let rows = version.len().min(cpu.len()).min(mem.len()).min(healthy.len());
    let rows = rows.min(model.len()).min(gpus.nrows());
    if n > rows {
        return Err(PyValueError::new_err(format!(
            "n = {n} but the state's arrays hold {rows} node slots"
        )));
    }
    let (c, m, n_gpu, share, fractional, allowed) = task;
    let spec = Task { cpu: c, num_gpu: n_gpu, share, fractional };
    let terms: Vec<(f64, Term)> = terms
        .iter()
        .map(|(w, (kind, args))| Ok((*w, term(kind, args)?)))
        .collect::<PyResult<_>>()?;

    // Feasible nodes (positions in idx) and their options (position, GPU, free share).
    let mut pos: Vec<usize> = Vec::new();
    let mut options: Vec<(usize, i64, i64)> = Vec::new();
    for (j, &v) in idx.iter().enumerate() {
        if v < 0 || v as usize >= n {
            return Err(PyValueError::new_err(format!(
                "node slot {v} is outside the state's {n} nodes"
            )));
        }
        let v = v as usize;
        if cpu[v] < c || mem[v] < m || !healthy[v] {
            continue;
        }
        let row = gpus.row(v);
        if n_gpu != 0 {
            if allowed.as_ref().is_some_and(|ids| !ids.contains(&model[v])) {
                continue;
            }
            let fits = if fractional {
                row.iter().any(|&f| f >= share)
            } else {
                row.iter().filter(|&&f| f == MILLI_PER_GPU).count() as i64 >= n_gpu
            };
            if !fits {
                continue;
            }
        }
        let at = pos.len();
        pos.push(j);
        if fractional {
            for (g, &f) in row.iter().enumerate() {
                if f >= share {
                    options.push((at, g as i64, f));
                }
            }
        } else {
            options.push((at, -1, 0));
        }
    }

    // Refresh each table's rows of the feasible nodes once (a table may serve two terms).
    let slots: Vec<usize> = pos.iter().map(|&j| idx[j] as usize).collect();
    let mut refreshed: Vec<*const FragTable> = Vec::new();
    for (_, t) in &terms {
        if let Term::Frag { table, .. } = t {
            let key = table.as_ptr() as *const FragTable;
            if !refreshed.contains(&key) {
                table.borrow_mut(py).refresh_slots(
                    n,
                    version,
                    gpus,
                    cpu,
                    model,
                    slots.iter().copied(),
                )?;
                refreshed.push(key);
            }
        }
    }

    // Each policy's score of every option, then the weighted total in profile order.
    let mut scores: Vec<Vec<f64>> = Vec::with_capacity(terms.len());
    for (_, t) in &terms {
        let mut out = Vec::with_capacity(options.len());
        match t {
            Term::Frag { table, spec: s, pressure } => {
                let table = table.borrow(py);
                let k = table.k();
                let (mut cnt, mut frag) = (vec![0i64; k], vec![0i64; k]);
                for &(at, _, f) in &options {
                    let v = slots[at];
                    let idle: i64 = gpus.row(v).sum();
                    let (b, a) = table.option(v, cpu[v], idle, f, &spec, &mut cnt, &mut frag);
                    let p = pressure.as_ref().map(|p| column(p, model[v]));
                    out.push(s.score(b, a, cpu[v], idle, &spec, p));
                }
            }
            Term::BestFit { cpu_norm, gpu_norm } => {
                let taken = spec.num_gpu * spec.share;
                for &(at, _, _) in &options {
                    let v = slots[at];
                    let idle: i64 = gpus.row(v).sum();
                    let waste = 0.5 * (cpu[v] - c) as f64 / cpu_norm
                        + 0.5 * (idle - taken) as f64 / gpu_norm;
                    out.push((100.0 * (1.0 - waste)).trunc());
                }
            }
            Term::Speed { scale, per_model } => {
                for &(at, _, _) in &options {
                    let Some(speeds) = per_model else {
                        out.push(0.0);
                        continue;
                    };
                    let m = model[slots[at]];
                    let told = if m < 0 {
                        0.0
                    } else {
                        *speeds.get(m as usize).ok_or_else(|| {
                            PyValueError::new_err(format!(
                                "speed: model id {m} but speeds for {} models",
                                speeds.len()
                            ))
                        })?
                    };
                    out.push(scale * told);
                }
            }
            Term::Locality { cost: None, .. } => out.resize(options.len(), 0.0),
            Term::Locality { weight, cost: Some(cost) } => {
                for &(at, _, _) in &options {
                    let v = slots[at];
                    let seconds = *cost.get(v).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "locality: node slot {v} but costs for {} nodes",
                            cost.len()
                        ))
                    })?;
                    out.push(-weight * seconds);
                }
            }
        }
        scores.push(out);
    }
    let mut total: Vec<f64> = match (terms.first(), scores.first()) {
        (Some((w, _)), Some(s)) => {
            if *w == 1.0 {
                s.clone()
            } else {
                s.iter().map(|x| x * w).collect()
            }
        }
        _ => vec![0.0; options.len()],
    };
    for ((w, _), s) in terms.iter().zip(&scores).skip(1) {
        for (t, x) in total.iter_mut().zip(s) {
            *t += x * w;
        }
    }

    let as_i64 = |v: Vec<usize>| v.into_iter().map(|x| x as i64).collect::<Vec<i64>>();
    if !fractional || pos.is_empty() {
        if pos.is_empty() {
            // As the Python path: nothing feasible, no per-policy scores.
            scores.clear();
        }
        return Ok((
            as_i64(pos).into_pyarray(py),
            None,
            total.into_pyarray(py),
            scores.into_iter().map(|s| s.into_pyarray(py)).collect(),
        ));
    }
    // The best option of each node: highest total, then the smallest tie-break key.
    let mut best: Vec<Option<usize>> = vec![None; pos.len()];
    let key = |o: usize| -> i64 {
        let (_, g, f) = options[o];
        if least_free {
            f * width + g
        } else {
            g
        }
    };
    for (o, &(at, _, _)) in options.iter().enumerate() {
        best[at] = match best[at] {
            Some(b) if total[b] > total[o] || (total[b] == total[o] && key(b) <= key(o)) => Some(b),
            _ => Some(o),
        };
    }
    let chosen: Vec<usize> = best.into_iter().flatten().collect();
    let pick = |v: &Vec<f64>| chosen.iter().map(|&o| v[o]).collect::<Vec<f64>>();
    Ok((
        chosen.iter().map(|&o| pos[options[o].0] as i64).collect::<Vec<_>>().into_pyarray(py),
        Some(chosen.iter().map(|&o| options[o].1).collect::<Vec<_>>().into_pyarray(py)),
        pick(&total).into_pyarray(py),
        scores.iter().map(|s| pick(s).into_pyarray(py)).collect(),
    ))
}

/// A per-model-column figure for model id `model` (-1, no GPU model: the last column).
fn column(per_model: &[f64], model: i64) -> f64 {
    let cols = per_model.len() as i64;
    per_model[(if model < 0 { model + cols } else { model }) as usize]
}
