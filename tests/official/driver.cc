// netdiv reference driver for the official MLPerf LoadGen (C++).
//
// Runs the official LoadGen against a SUT that answers every sample at once
// and a QSL that holds no data, so conformance tests and benchmarks can put
// its logs, issued sample order and cost next to those of netdiv's Rust
// LoadGen. Built and linked by fetch-build.sh; see README.md.

#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "loadgen.h"
#include "query_sample.h"
#include "query_sample_library.h"
#include "system_under_test.h"
#include "test_settings.h"

// The official library keeps its built-in mlperf.conf text behind this global
// pointer. FromConfig(..., conf_type = 0) parses whatever it points to, and it
// is the only path that honours the RNG seeds, so --mlperf-conf swaps the text
// instead of passing a file name (a file name is ignored for conf_type 0).
extern const char* mlperf_conf;

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

const char kUsage[] =
    "usage: official-driver --scenario SingleStream|MultiStream|Server|Offline\n"
    "         --total-sample-count N --performance-sample-count N --output DIR\n"
    "         [--mode PerformanceOnly|AccuracyOnly|SubmissionRun|"
    "FindPeakPerformance]\n"
    "         [--model NAME] [--mlperf-conf FILE] [--user-conf FILE]\n"
    "         [--audit-conf FILE] [--record-issued FILE] [--record-loaded FILE]\n"
    "         [--sut-name NAME] [--null-output-tokens N] [--no-trace]\n"
    "         [--no-summary-stdout]\n"
    "\n"
    "Null SUT + synthetic QSL under the official MLPerf LoadGen.\n"
    "  --model             model name for config lookups (default: null)\n"
    "  --mlperf-conf       replaces the library's built-in mlperf.conf text\n"
    "                      (seeds are read from it); default: built-in text\n"
    "  --user-conf         user.conf applied after mlperf.conf\n"
    "  --audit-conf        audit config path (default: audit.config in the\n"
    "                      working directory, the official default)\n"
    "  --record-issued     write each issued QSL index, in issue order, one per "
    "line\n"
    "  --record-loaded     append 'load i,j,...' / 'unload i,j,...' lines\n"
    "  --sut-name          SUT name reported to LoadGen (default: null-sut)\n"
    "  --null-output-tokens  token models: report each sample's payload as\n"
    "                      its first token (FirstTokenComplete), then complete\n"
    "                      it with n_tokens = N\n"
    "  --no-trace          disable mlperf_log_trace.json\n"
    "  --no-summary-stdout do not copy the summary to stdout\n";

[[noreturn]] void UsageError(const std::string& message) {
  std::cerr << "driver: " << message << "\n\n" << kUsage;
  std::exit(kExitUsage);
}

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "driver: error: " << message << "\n";
  std::exit(kExitFailure);
}

struct Options {
  mlperf::TestScenario scenario = mlperf::TestScenario::SingleStream;
  std::string scenario_name;
  mlperf::TestMode mode = mlperf::TestMode::PerformanceOnly;
  std::string model = "null";
  std::optional<std::string> mlperf_conf_path;
  std::optional<std::string> user_conf_path;
  std::string audit_conf_path = "audit.config";
  uint64_t total_sample_count = 0;
  uint64_t performance_sample_count = 0;
  std::string output_dir;
  std::optional<std::string> record_issued_path;
  std::optional<std::string> record_loaded_path;
  std::string sut_name = "null-sut";
  std::optional<int64_t> output_tokens;
  bool trace = true;
  bool summary_to_stdout = true;
};

uint64_t ParseCount(const std::string& flag, const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') {
    UsageError(flag + " expects a non-negative integer, got '" + text + "'");
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') {
    UsageError(flag + " expects a non-negative integer, got '" + text + "'");
  }
  return value;
}

Options ParseOptions(int argc, char** argv) {
  static const std::map<std::string, mlperf::TestScenario> kScenarios = {
      {"SingleStream", mlperf::TestScenario::SingleStream},
      {"MultiStream", mlperf::TestScenario::MultiStream},
      {"Server", mlperf::TestScenario::Server},
      {"Offline", mlperf::TestScenario::Offline},
  };
  static const std::map<std::string, mlperf::TestMode> kModes = {
      {"PerformanceOnly", mlperf::TestMode::PerformanceOnly},
      {"AccuracyOnly", mlperf::TestMode::AccuracyOnly},
      {"SubmissionRun", mlperf::TestMode::SubmissionRun},
      {"FindPeakPerformance", mlperf::TestMode::FindPeakPerformance},
  };

  Options opts;
  bool have_total = false;
  bool have_performance = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag == "--no-trace") {
      opts.trace = false;
      continue;
    }
    if (flag == "--no-summary-stdout") {
      opts.summary_to_stdout = false;
      continue;
    }
    if (i + 1 >= argc) UsageError("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--scenario") {
      auto it = kScenarios.find(value);
      if (it == kScenarios.end()) UsageError("unknown scenario '" + value + "'");
      opts.scenario = it->second;
      opts.scenario_name = value;
    } else if (flag == "--mode") {
      auto it = kModes.find(value);
      if (it == kModes.end()) UsageError("unknown mode '" + value + "'");
      opts.mode = it->second;
    } else if (flag == "--model") {
      opts.model = value;
    } else if (flag == "--mlperf-conf") {
      opts.mlperf_conf_path = value;
    } else if (flag == "--user-conf") {
      opts.user_conf_path = value;
    } else if (flag == "--audit-conf") {
      opts.audit_conf_path = value;
    } else if (flag == "--total-sample-count") {
      opts.total_sample_count = ParseCount(flag, value);
      have_total = true;
    } else if (flag == "--performance-sample-count") {
      opts.performance_sample_count = ParseCount(flag, value);
      have_performance = true;
    } else if (flag == "--output") {
      opts.output_dir = value;
    } else if (flag == "--record-issued") {
      opts.record_issued_path = value;
    } else if (flag == "--record-loaded") {
      opts.record_loaded_path = value;
    } else if (flag == "--sut-name") {
      opts.sut_name = value;
    } else if (flag == "--null-output-tokens") {
      errno = 0;
      char* end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || errno != 0 || *end != '\0') {
        UsageError(flag + " expects an integer, got '" + value + "'");
      }
      opts.output_tokens = n;
    } else {
      UsageError("unknown flag '" + flag + "'");
    }
  }
  if (opts.scenario_name.empty()) UsageError("--scenario is required");
  if (!have_total) UsageError("--total-sample-count is required");
  if (!have_performance) UsageError("--performance-sample-count is required");
  if (opts.output_dir.empty()) UsageError("--output is required");
  if (opts.total_sample_count == 0) {
    UsageError("--total-sample-count must be positive");
  }
  if (opts.total_sample_count > UINT32_MAX) {
    UsageError("--total-sample-count must fit in 32 bits (response payload)");
  }
  return opts;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void RequireReadable(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail("cannot read " + path + ": " + std::strerror(errno));
}

// Keeps, in arrival order, the QSL index of every sample handed to IssueQuery.
class IssueRecorder {
 public:
  explicit IssueRecorder(size_t expected) { indices_.reserve(expected); }

  void Record(const std::vector<mlperf::QuerySample>& samples) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& sample : samples) indices_.push_back(sample.index);
  }

  void WriteTo(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) Fail("cannot write " + path + ": " + std::strerror(errno));
    for (mlperf::QuerySampleIndex index : indices_) {
      std::fprintf(out, "%zu\n", static_cast<size_t>(index));
    }
    if (std::fclose(out) != 0) {
      Fail("cannot write " + path + ": " + std::strerror(errno));
    }
  }

 private:
  std::mutex mutex_;
  std::vector<mlperf::QuerySampleIndex> indices_;
};

// Answers each query on the calling thread with one QuerySamplesComplete.
// A response's payload is its sample's QSL index as a little-endian u32, so
// accuracy logs show which sample each response belongs to. The payloads are
// laid out once for every index, so IssueQuery only fills in pointers. With
// output tokens, the same payload first goes to FirstTokenComplete and the
// completion carries n_tokens.
class NullSut : public mlperf::SystemUnderTest {
 public:
  NullSut(std::string name, size_t total_sample_count, IssueRecorder* recorder,
          std::optional<int64_t> output_tokens)
      : name_(std::move(name)),
        payloads_(total_sample_count * kPayloadSize),
        recorder_(recorder),
        output_tokens_(output_tokens) {
    for (size_t index = 0; index < total_sample_count; ++index) {
      const uint32_t value = static_cast<uint32_t>(index);
      for (size_t byte = 0; byte < kPayloadSize; ++byte) {
        payloads_[index * kPayloadSize + byte] =
            static_cast<uint8_t>(value >> (8 * byte));
      }
    }
  }

  const std::string& Name() override { return name_; }

  void IssueQuery(const std::vector<mlperf::QuerySample>& samples) override {
    if (recorder_ != nullptr) recorder_->Record(samples);

    // Reused per issuing thread so the cost measured is LoadGen's, not malloc's.
    thread_local std::vector<mlperf::QuerySampleResponse> responses;
    const size_t n = samples.size();
    responses.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* payload = &payloads_[samples[i].index * kPayloadSize];
      responses[i] = mlperf::QuerySampleResponse(
          samples[i].id, reinterpret_cast<uintptr_t>(payload), kPayloadSize);
    }
    if (output_tokens_) {
      mlperf::FirstTokenComplete(responses.data(), n);
      for (auto& response : responses) response.n_tokens = *output_tokens_;
    }
    mlperf::QuerySamplesComplete(responses.data(), n);
  }

  void FlushQueries() override {}

 private:
  static constexpr size_t kPayloadSize = 4;

  std::string name_;
  std::vector<uint8_t> payloads_;
  IssueRecorder* recorder_;
  std::optional<int64_t> output_tokens_;
};

// Holds no sample data; optionally logs which sets LoadGen loads and unloads.
class SyntheticQsl : public mlperf::QuerySampleLibrary {
 public:
  SyntheticQsl(size_t total, size_t performance,
               const std::optional<std::string>& record_path)
      : name_("netdiv-synthetic-qsl"), total_(total), performance_(performance) {
    if (record_path) {
      record_.open(*record_path, std::ios::out | std::ios::trunc);
      if (!record_) Fail("cannot write " + *record_path);
    }
  }

  const std::string& Name() override { return name_; }
  size_t TotalSampleCount() override { return total_; }
  size_t PerformanceSampleCount() override { return performance_; }

  void LoadSamplesToRam(
      const std::vector<mlperf::QuerySampleIndex>& samples) override {
    Record("load", samples);
  }

  void UnloadSamplesFromRam(
      const std::vector<mlperf::QuerySampleIndex>& samples) override {
    Record("unload", samples);
  }

 private:
  void Record(const char* verb,
              const std::vector<mlperf::QuerySampleIndex>& samples) {
    if (!record_.is_open()) return;
    record_ << verb << ' ';
    for (size_t i = 0; i < samples.size(); ++i) {
      if (i != 0) record_ << ',';
      record_ << samples[i];
    }
    record_ << '\n';
    record_.flush();
  }

  std::string name_;
  size_t total_;
  size_t performance_;
  std::ofstream record_;
};

// mlperf.conf first, then user.conf, exactly as the official FromConfig chains
// them: a user.conf load (conf_type 1) pulls in the mlperf.conf text itself.
mlperf::TestSettings BuildSettings(const Options& opts) {
  static std::string replacement_mlperf_conf;
  if (opts.mlperf_conf_path) {
    replacement_mlperf_conf = ReadWholeFile(*opts.mlperf_conf_path);
    mlperf_conf = replacement_mlperf_conf.c_str();
  }

  mlperf::TestSettings settings;
  int rc = 0;
  if (opts.user_conf_path) {
    RequireReadable(*opts.user_conf_path);
    rc = settings.FromConfig(*opts.user_conf_path, opts.model,
                             opts.scenario_name, 1);
  } else {
    rc = settings.FromConfig("", opts.model, opts.scenario_name, 0);
  }
  if (rc != 0) {
    // The parser's own message names the line, but it is queued for a log
    // that only exists once a test starts, so summarise it here.
    Fail("the official LoadGen rejected the config (FromConfig returned " +
         std::to_string(rc) +
         (rc == -EINVAL ? ": some line is not 'key = integer-or-double'"
                        : ": cannot open a config file") +
         ")");
  }
  // The command line wins over a "mode" key in the config files.
  settings.scenario = opts.scenario;
  settings.mode = opts.mode;
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opts = ParseOptions(argc, argv);

  std::error_code ec;
  std::filesystem::create_directories(opts.output_dir, ec);
  if (ec) Fail("cannot create " + opts.output_dir + ": " + ec.message());

  const mlperf::TestSettings settings = BuildSettings(opts);

  mlperf::LogSettings log_settings;
  log_settings.log_output.outdir = opts.output_dir;
  log_settings.log_output.prefix = "mlperf_log_";
  log_settings.log_output.suffix = "";
  log_settings.log_output.copy_summary_to_stdout = opts.summary_to_stdout;
  log_settings.enable_trace = opts.trace;

  std::unique_ptr<IssueRecorder> recorder;
  if (opts.record_issued_path) {
    recorder = std::make_unique<IssueRecorder>(
        static_cast<size_t>(opts.total_sample_count));
  }
  NullSut sut(opts.sut_name, opts.total_sample_count, recorder.get(),
              opts.output_tokens);
  SyntheticQsl qsl(opts.total_sample_count, opts.performance_sample_count,
                   opts.record_loaded_path);

  mlperf::StartTest(&sut, &qsl, settings, log_settings, opts.audit_conf_path);

  if (recorder) recorder->WriteTo(*opts.record_issued_path);

  std::cout.flush();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::cerr << "driver: peak_rss_kb=" << usage.ru_maxrss << std::endl;
  return 0;
}
