//! The FindPeakPerformance mode: the official search for the highest
//! Server QPS that meets the latency constraints.

use super::passes::{first_performance_set, load, run_pass};
use super::{Context, TestError};
use crate::engine::generate::{LoadableSet, Pass};
use crate::engine::results::PerformanceSummary;
use crate::engine::settings::{EffectiveSettings, Scenario};
use crate::mllog;

/// The official search: check the user's QPS, widen until it fails, then
/// bisect to the requested precision. Server only.
pub(super) fn find_peak_performance(
    ctx: &mut Context,
    base: &EffectiveSettings,
) -> Result<Option<PerformanceSummary>, TestError> {
    mllog!(
        ctx.detail,
        "generic_message",
        "Starting FindPeakPerformance mode"
    )?;
    if base.scenario != Scenario::Server {
        mllog!(ctx.detail, error "error_invalid_config", "Finding peak performance is only supported in Server scenarios.")?;
        return Ok(None);
    }
    let field = |s: &EffectiveSettings| format!("{:.6}", s.target_qps);
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Check validity of the base settings field: {}",
            field(base)
        )
    )?;
    let run = |ctx: &mut Context,
               s: &EffectiveSettings,
               set: Option<&LoadableSet>|
     -> Result<PerformanceSummary, TestError> {
        let own;
        let set = match set {
            Some(set) => set,
            None => {
                own = first_performance_set(ctx, s)?;
                load(ctx, &own)?;
                &own
            }
        };
        let r = run_pass(ctx, s, Pass::Performance, set)?;
        Ok(PerformanceSummary::new(ctx.sut_name.clone(), s.clone(), r))
    };
    let base_summary = run(ctx, base, None)?;
    if !base_summary.perf_constraints_met {
        mllog!(ctx.detail, error "error_runtime", format!("FindPeakPerformance: Initial lower bound does not satisfy performance constraints, msg: {}", base_summary.perf_constraints_recommendation))?;
        return Ok(Some(base_summary));
    }
    let step = base.requested.server_find_peak_qps_boundary_step_size;
    let mut lower = base_summary;
    let mut upper = loop {
        let mut u = lower.settings.clone();
        u.target_qps *= 1.0 + step;
        mllog!(
            ctx.detail,
            "generic_message",
            format!(
                "FindBoundaries: Checking fields [{}, {})",
                field(&lower.settings),
                field(&u)
            )
        )?;
        let s = run(ctx, &u, None)?;
        if !s.perf_constraints_met {
            break s;
        }
        lower = s;
    };
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Found boundaries: [{}, {})",
            field(&lower.settings),
            field(&upper.settings)
        )
    )?;
    let set = first_performance_set(ctx, &upper.settings)?;
    load(ctx, &set)?;
    let scale = 10f64.powi(base.requested.server_find_peak_qps_decimals_of_precision);
    while (lower.settings.target_qps * scale).floor() + 1.0
        < (upper.settings.target_qps * scale).floor()
    {
        let mut m = lower.settings.clone();
        m.target_qps = lower.settings.target_qps
            + (upper.settings.target_qps - lower.settings.target_qps) / 2.0;
        mllog!(
            ctx.detail,
            "generic_message",
            format!(
                "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [{}, {}): {}",
                field(&lower.settings),
                field(&upper.settings),
                field(&m)
            )
        )?;
        let s = run(ctx, &m, Some(&set))?;
        if s.perf_constraints_met {
            lower = s;
        } else {
            upper = s;
        }
    }
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Found peak performance field: {}",
            field(&lower.settings)
        )
    )?;
    ctx.qsl.unload_samples_from_ram(&set.samples);
    Ok(Some(lower))
}
