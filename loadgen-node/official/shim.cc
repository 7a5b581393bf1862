// The netdiv QDL under the official MLPerf LoadGen: a QueryDispatchLibrary
// whose Name() asks the Rust QDL (a live round trip to every node on each
// call), IssueQuery/FlushQueries forwarded to it, a QSL forwarded to the
// Rust sample store, and completions back through QuerySamplesComplete.
// Compiled with the unaltered official sources by build.rs (feature
// `official`); the Rust side is loadgen-node/src/official.rs.

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "loadgen.h"
#include "query_dispatch_library.h"
#include "query_sample.h"
#include "query_sample_library.h"
#include "test_settings.h"

extern const char* mlperf_conf;

extern "C" {

// Callbacks into Rust; `ctx` is the Rust side's state.
struct NetdivCallbacks {
  void* ctx;
  // Writes the SUT name (not NUL-terminated) to *text/*len, valid until the
  // next call; returns 0, or non-zero with the reason in *text/*len.
  int (*name)(void* ctx, const char** text, size_t* len);
  void (*issue)(void* ctx, const uint64_t* ids, const uint64_t* indices, size_t n);
  void (*flush)(void* ctx);
  size_t total_sample_count;
  size_t performance_sample_count;
  void (*load)(void* ctx, const uint64_t* indices, size_t n);
  void (*unload)(void* ctx, const uint64_t* indices, size_t n);
  // The QSL's name for the logs: what the samples are (NUL-terminated).
  const char* qsl_name;
};

struct NetdivRunOptions {
  const char* scenario;
  int scenario_code;  // mlperf::TestScenario
  int mode_code;      // mlperf::TestMode
  const char* model;
  const char* mlperf_conf_text;  // NULL: the library's built-in mlperf.conf
  const char* user_conf;         // NULL: none
  const char* audit_conf;
  const char* outdir;
  int enable_trace;
};

}  // extern "C"

namespace {

std::vector<uint64_t> Widen(const std::vector<mlperf::QuerySampleIndex>& v) {
  return std::vector<uint64_t>(v.begin(), v.end());
}

class RustQdl : public mlperf::QueryDispatchLibrary {
 public:
  explicit RustQdl(const NetdivCallbacks* cb) : cb_(cb) {}

  const std::string& Name() override {
    const char* text = nullptr;
    size_t len = 0;
    int rc = cb_->name(cb_->ctx, &text, &len);
    name_.assign(text == nullptr ? "" : text, len);
    if (rc != 0) name_ = "(Name() failed: " + name_ + ")";
    return name_;
  }

  void IssueQuery(const std::vector<mlperf::QuerySample>& samples) override {
    thread_local std::vector<uint64_t> ids, indices;
    ids.resize(samples.size());
    indices.resize(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      ids[i] = samples[i].id;
      indices[i] = samples[i].index;
    }
    cb_->issue(cb_->ctx, ids.data(), indices.data(), samples.size());
  }

  void FlushQueries() override { cb_->flush(cb_->ctx); }

 private:
  const NetdivCallbacks* cb_;
  std::string name_;
};

class RustQsl : public mlperf::QuerySampleLibrary {
 public:
  explicit RustQsl(const NetdivCallbacks* cb)
      : cb_(cb), name_(cb->qsl_name != nullptr ? cb->qsl_name : "netdiv-qsl") {}
  const std::string& Name() override { return name_; }
  size_t TotalSampleCount() override { return cb_->total_sample_count; }
  size_t PerformanceSampleCount() override { return cb_->performance_sample_count; }
  void LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex>& s) override {
    auto v = Widen(s);
    cb_->load(cb_->ctx, v.data(), v.size());
  }
  void UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex>& s) override {
    auto v = Widen(s);
    cb_->unload(cb_->ctx, v.data(), v.size());
  }

 private:
  const NetdivCallbacks* cb_;
  std::string name_;
};

void WriteError(char* err, size_t cap, const std::string& text) {
  if (cap == 0) return;
  size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

// The official responses of `n` samples: `data[i]` holds `sizes[i]` bytes
// of sample `ids[i]`'s output, `n_tokens[i]` its token count (0 for models
// without token latencies).
std::vector<mlperf::QuerySampleResponse>& Responses(
    const uint64_t* ids, const uint8_t* const* data, const size_t* sizes,
    const int64_t* n_tokens, size_t n) {
  thread_local std::vector<mlperf::QuerySampleResponse> responses;
  responses.resize(n);
  for (size_t i = 0; i < n; ++i) {
    responses[i] = mlperf::QuerySampleResponse(
        static_cast<mlperf::ResponseId>(ids[i]),
        reinterpret_cast<uintptr_t>(data[i]), sizes[i], n_tokens[i]);
  }
  return responses;
}

}  // namespace

extern "C" {

// Runs one test under the official LoadGen. Returns 0, or non-zero with a
// reason in `err`.
int netdiv_official_run(const NetdivCallbacks* cb, const NetdivRunOptions* o,
                        char* err, size_t err_cap) {
  try {
    static std::string replaced_conf;
    if (o->mlperf_conf_text != nullptr) {
      replaced_conf = o->mlperf_conf_text;
      mlperf_conf = replaced_conf.c_str();
    }
    mlperf::TestSettings settings;
    int rc = o->user_conf != nullptr
                 ? settings.FromConfig(o->user_conf, o->model, o->scenario, 1)
                 : settings.FromConfig("", o->model, o->scenario, 0);
    if (rc != 0) {
      WriteError(err, err_cap,
                 "the official LoadGen rejected the config files (FromConfig returned " +
                     std::to_string(rc) + ")");
      return 1;
    }
    settings.scenario = static_cast<mlperf::TestScenario>(o->scenario_code);
    settings.mode = static_cast<mlperf::TestMode>(o->mode_code);

    mlperf::LogSettings log;
    log.log_output.outdir = o->outdir;
    log.log_output.prefix = "mlperf_log_";
    log.log_output.suffix = "";
    log.log_output.copy_summary_to_stdout = true;
    log.enable_trace = o->enable_trace != 0;

    RustQdl qdl(cb);
    RustQsl qsl(cb);
    mlperf::StartTest(&qdl, &qsl, settings, log, o->audit_conf);
    return 0;
  } catch (const std::exception& e) {
    WriteError(err, err_cap, std::string("the official LoadGen threw: ") + e.what());
    return 1;
  }
}

// Completes samples; the data is valid for the duration of the call (the
// LoadGen copies what it logs).
void netdiv_official_complete(const uint64_t* ids, const uint8_t* const* data,
                              const size_t* sizes, const int64_t* n_tokens,
                              size_t n) {
  auto& responses = Responses(ids, data, sizes, n_tokens, n);
  mlperf::QuerySamplesComplete(responses.data(), n);
}

// Reports the first tokens of samples (token models): `data[i]` holds the
// first token's bytes. Their time to first token ends here.
void netdiv_official_first_token(const uint64_t* ids,
                                 const uint8_t* const* data,
                                 const size_t* sizes, size_t n) {
  thread_local std::vector<int64_t> no_counts;
  no_counts.assign(n, 0);
  auto& responses = Responses(ids, data, sizes, no_counts.data(), n);
  mlperf::FirstTokenComplete(responses.data(), n);
}

// Ends the test early (the network SUT cannot finish it).
void netdiv_official_abort() { mlperf::AbortTest(); }

}  // extern "C"
