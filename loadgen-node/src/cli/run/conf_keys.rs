//! Config lines that apply to nothing. The LoadGen reads a line only when
//! its model part is the run's model (or `*`) and its scenario part a
//! scenario (or `*`); any other line is skipped without a word, so a
//! user.conf written with the checker's model spelling (`llama3.1-8b`
//! where mlperf.conf says `llama3_1-8b`) silently runs with the defaults.
//! These warnings name each such line and, where it can tell, the key
//! that would have been read.

use loadgen_node::engine::settings::ConfigFile;
use netdiv_proto::Benchmark;

/// The scenarios a config line may name.
const SCENARIOS: [&str; 4] = ["SingleStream", "MultiStream", "Server", "Offline"];

/// One warning per line of `user` whose model part no model of `mlperf`
/// carries, or whose scenario part is not a scenario, and per setting
/// name that no LoadGen setting has.
pub(crate) fn unmatched(user: &ConfigFile, mlperf: &ConfigFile) -> Vec<String> {
    let models: Vec<&str> = mlperf.keys().map(|(_, key)| parts(key).0).collect();
    let mut lines: Vec<(usize, &str)> = user.keys().collect();
    lines.sort();
    let mut warnings = Vec::new();
    for (line, key) in lines {
        let (model, scenario, name) = parts(key);
        let at = format!("{}:{line}: {key:?}", user.origin());
        if model != "*" && !models.contains(&model) {
            warnings.push(match conf_spelling(model, &models) {
                Some(known) => format!(
                    "{at} applies to no model: mlperf.conf calls {model} {known:?}, so the \
                     LoadGen ignores this line (write {known}.{scenario}.{name})"
                ),
                None => format!(
                    "{at} applies to no model: mlperf.conf has no model {model:?}, so the \
                     LoadGen ignores this line"
                ),
            });
        }
        if scenario != "*" && !SCENARIOS.contains(&scenario) {
            let hint = match SCENARIOS.iter().find(|s| s.eq_ignore_ascii_case(scenario)) {
                Some(s) => format!(" (write {s})"),
                None if scenario.eq_ignore_ascii_case("interactive") => format!(
                    " (the interactive scenario is the Server scenario of the model \
                     {model}-interactive: write {model}-interactive.Server.{name})"
                ),
                None => format!(" (the scenarios: {}, or *)", SCENARIOS.join(", ")),
            };
            warnings.push(format!(
                "{at} names no scenario, so the LoadGen ignores this line{hint}"
            ));
        }
    }
    for (line, key) in &user.unknown_keys {
        warnings.push(format!(
            "{}:{line}: {key:?} names no setting, so the LoadGen ignores this line",
            user.origin()
        ));
    }
    warnings
}

/// `model.scenario.name`, split from the right (model names hold dots).
fn parts(key: &str) -> (&str, &str, &str) {
    let mut it = key.rsplitn(3, '.');
    let name = it.next().unwrap_or("");
    let scenario = it.next().unwrap_or("");
    let model = it.next().unwrap_or("");
    (model, scenario, name)
}

/// The mlperf.conf name of the benchmark `model` names in another
/// spelling (the checker's, or with an accuracy target), if it has one.
fn conf_spelling(model: &str, models: &[&str]) -> Option<String> {
    let known = Benchmark::parse(model).ok()?.config_model();
    models.contains(&known.as_str()).then_some(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLPERF: &str = "llama3_1-8b.Offline.min_duration = 600000\n\
                          llama2-70b.Server.target_latency = 0\n\
                          llama2-70b-interactive.Server.target_latency = 0\n\
                          resnet50.Server.target_latency = 15\n";

    fn warnings(user: &str) -> Vec<String> {
        let mlperf = ConfigFile::parse(MLPERF, "mlperf.conf").unwrap();
        let user = ConfigFile::parse(user, "user.conf").unwrap();
        unmatched(&user, &mlperf)
    }

    #[test]
    fn the_checkers_spelling_is_named_with_the_key_the_loadgen_reads() {
        let said = warnings("llama3.1-8b.Offline.target_qps = 100\n");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0]
                .starts_with("user.conf:1: \"llama3.1-8b.Offline.target_qps\" applies to no model")
                && said[0].contains("write llama3_1-8b.Offline.target_qps"),
            "{said:?}"
        );
    }

    #[test]
    fn unknown_models_scenarios_and_settings_are_each_named() {
        let said = warnings(
            "gpt5.Offline.target_qps = 1\nresnet50.offline.target_qps = 1\n\
             llama2-70b.Interactive.target_qps = 1\n*.Server.target_qsp = 1\n",
        );
        assert_eq!(said.len(), 4, "{said:?}");
        assert!(said[0].contains("has no model \"gpt5\""), "{said:?}");
        assert!(said[1].contains("names no scenario") && said[1].contains("(write Offline)"));
        assert!(said[2].contains("write llama2-70b-interactive.Server.target_qps"));
        assert!(said[3].contains("\"*.Server.target_qsp\" names no setting"));
    }

    #[test]
    fn lines_that_apply_say_nothing() {
        assert!(warnings(
            "*.Offline.target_qps = 1\nresnet50.Server.target_qps = 1\n\
             llama3_1-8b.*.min_duration = 1\n"
        )
        .is_empty());
    }
}
