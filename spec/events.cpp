#include "spec/events.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace shardscope::spec {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A float as JSON: finite numbers as themselves, NaN and infinities as null.
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

// A value as an error message shows it: a scalar as JSON, cut at 80 bytes, an array or object by
// its type. Dumping a whole value recursed once per nesting level (a 1 MB line of '[' overflowed
// the backend's stack) and copied any size into the message.
std::string preview(const Json& v) {
  if (v.is_structured()) return std::string("an ") + v.type_name();
  std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

template <class E, class Event>
concept event_of = std::same_as<std::remove_const_t<E>, Event>;

// The plain fields of the flat events, each named once for the encoder and the reader, in the
// order both take them (the order of the keys of a line, and which of two errors is reported):
// `f(key, member)` for each, with members of a const event when encoding.
template <event_of<StepEvent> E, class F>
void fields(E& e, F&& f) {
  f("step", e.step);
  f("loss", e.loss);
  f("lr", e.lr);
  f("grad_norm", e.grad_norm);
  f("tokens_per_s", e.tokens_per_s);
  f("mfu", e.mfu);
}
template <event_of<MemEvent> E, class F>
void fields(E& e, F&& f) {
  f("step", e.step);
  f("allocated", e.allocated);
  f("reserved", e.reserved);
  f("peak", e.peak);
  f("rss", e.rss);
  f("cuda_allocated", e.cuda_allocated);
  f("cuda_reserved", e.cuda_reserved);
  f("cuda_peak", e.cuda_peak);
}
template <event_of<CkptEvent> E, class F>
void fields(E& e, F&& f) {
  f("step", e.step);
  f("path", e.path);
  f("kind", e.kind);
}
template <event_of<LogEvent> E, class F>
void fields(E& e, F&& f) {
  f("level", e.level);
  f("message", e.message);
}
template <event_of<PhasesEvent> E, class F>
void fields(E& e, F&& f) {
  f("step", e.step);
  f("wall", e.wall);
  f("data", e.data);
  f("forward", e.forward);
  f("backward", e.backward);
  f("optimizer", e.optimizer);
  f("comm_exposed", e.comm_exposed);
  f("comm_total", e.comm_total);
  f("copy", e.copy);
  f("other", e.other);
}
template <event_of<SysEvent> E, class F>
void fields(E& e, F&& f) {
  f("step", e.step);
  f("cpu", e.cpu);
  f("rss", e.rss);
  f("load1", e.load1);
}

// Writes one plain field: a float through number(), an absent optional not at all.
struct Put {
  Json& out;
  template <class T>
  void operator()(const char* key, const T& value) const {
    if constexpr (std::is_same_v<T, double>) {
      out[key] = number(value);
    } else {
      out[key] = value;
    }
  }
  template <class T>
  void operator()(const char* key, const std::optional<T>& value) const {
    if (value) (*this)(key, *value);
  }
};

struct Encoder {
  Json& out;
  void operator()(const HelloEvent& e) const {
    out["world_size"] = e.world_size;
    out["local_world_size"] = e.local_world_size;
    out["config_hash"] = e.config_hash;
    out["versions"] = Json::object();
    for (const auto& [name, version] : e.versions) out["versions"][name] = version;
    out["params"] = {{"total", e.params_total}, {"trainable", e.params_trainable}};
    out["mem_estimate"] = e.mem_estimate;
    if (e.device) {
      out["device"] = {{"type", e.device->type},
                       {"index", e.device->index},
                       {"name", e.device->name},
                       {"memory_bytes", e.device->memory_bytes},
                       {"capability", e.device->capability}};
    }
    if (e.flops_per_token) out["flops_per_token"] = number(*e.flops_per_token);
    if (e.pack_efficiency) out["pack_efficiency"] = number(*e.pack_efficiency);
    if (e.data_bound)
      out["data_bound"] = {{"samples", e.data_bound->samples},
                           {"longest", e.data_bound->longest},
                           {"most_visual_tokens", e.data_bound->most_visual_tokens},
                           {"shortest_with_image", e.data_bound->shortest_with_image}};
  }
  void operator()(const StepEvent& e) const {
    fields(e, Put{out});
    out["comm_bytes"] = {{"all_gather", e.all_gather_bytes},
                         {"reduce_scatter", e.reduce_scatter_bytes}};
  }
  void operator()(const EvalEvent& e) const {
    out["step"] = e.step;
    out["metrics"] = Json::object();
    for (const auto& [name, value] : e.metrics) out["metrics"][name] = number(value);
  }
  void operator()(const MemEvent& e) const { fields(e, Put{out}); }
  void operator()(const CkptEvent& e) const { fields(e, Put{out}); }
  void operator()(const LogEvent& e) const { fields(e, Put{out}); }
  void operator()(const DoneEvent& e) const {
    out["status"] = to_string(e.status);
    if (e.objective_is_array || e.objective.size() > 1) {
      Json values = Json::array();
      for (double v : e.objective) values.push_back(number(v));
      out["objective"] = values;
    } else if (e.objective.size() == 1) {
      out["objective"] = number(e.objective.front());
    }
    if (e.steps) out["steps"] = *e.steps;
  }
  void operator()(const ErrorEvent& e) const {
    out["kind"] = to_string(e.kind);
    out["message"] = e.message;
    out["hint"] = e.hint;
    if (e.memory) {
      const OomMemory& m = *e.memory;
      Json memory = {{"device", m.device},
                     {"request", m.request},
                     {"allocated", m.allocated},
                     {"peak", m.peak}};
      for (auto [key, value] :
           {std::pair{"limit", &m.limit}, std::pair{"reserved", &m.reserved},
            std::pair{"largest_free", &m.largest_free}, std::pair{"capacity", &m.capacity},
            std::pair{"device_free", &m.device_free}}) {
        if (*value) memory[key] = **value;
      }
      if (m.snapshot) memory["snapshot"] = *m.snapshot;
      out["memory"] = memory;
    }
  }
  void operator()(const SysEvent& e) const {
    fields(e, Put{out});
    if (e.gpu) {
      Json gpu = Json::object();
      auto put = [&gpu](const char* key, const std::optional<double>& v) {
        if (v) gpu[key] = number(*v);
      };
      put("util", e.gpu->util);
      put("sm_clock_mhz", e.gpu->sm_clock_mhz);
      put("power_w", e.gpu->power_w);
      put("power_limit_w", e.gpu->power_limit_w);
      put("temp_c", e.gpu->temp_c);
      if (e.gpu->mem_used) gpu["mem_used"] = *e.gpu->mem_used;
      put("pcie_tx", e.gpu->pcie_tx);
      put("pcie_rx", e.gpu->pcie_rx);
      out["gpu"] = gpu;
    }
  }
  void operator()(const PhasesEvent& e) const { fields(e, Put{out}); }
  void operator()(const SampleEvent& e) const {
    out["step"] = e.step;
    out["probe"] = e.probe;
    out["prompt"] = e.prompt;
    out["images"] = e.images;
    out["text"] = e.text;
    out["tokens"] = e.tokens;
    if (e.reference) out["reference"] = *e.reference;
    if (e.exact_match) out["exact_match"] = *e.exact_match;
    if (e.f1) out["f1"] = number(*e.f1);
    if (e.cer) out["cer"] = number(*e.cer);
  }
};

// Reads typed fields out of one parsed line; the first failure is kept with its field path.
class Reader {
 public:
  Reader(const Json& object, std::string kind) : m_obj(object), m_kind(std::move(kind)) {}

  bool failed() const { return !m_error.empty(); }
  const Json& root() const { return m_obj; }
  const std::string& error() const { return m_error; }

  const Json* field(const Json& obj, std::string_view path, const char* key, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) set_error(path, key, "is missing");
      return nullptr;
    }
    return &*it;
  }

  std::int64_t integer(const char* key, bool required = true) {
    return integer_in(m_obj, "", key, required);
  }
  std::int64_t integer_in(const Json& obj, std::string_view path, const char* key,
                          bool required = true) {
    const Json* v = field(obj, path, key, required);
    if (!v) return 0;
    // Only values an int64 holds: a larger one (2^64 - 1 read as unsigned, 4.9e19 written as a
    // float) wrapped around, or was undefined behaviour to convert.
    constexpr double kLimit = 9223372036854775808.0;  // 2^63
    if (v->is_number_unsigned() &&
        v->get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()}) {
      set_error(path, key, "expected an integer below 2^63, got " + preview(*v));
      return 0;
    }
    if (v->is_number_integer()) return v->get<std::int64_t>();
    if (v->is_number_float()) {
      double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= -kLimit && d < kLimit)
        return static_cast<std::int64_t>(d);
    }
    set_error(path, key, "expected an integer, got " + preview(*v));
    return 0;
  }

  // An int field (v, rank, world sizes, device index): 2^32 + 1 must not pass as 1.
  int int32_in(const Json& obj, std::string_view path, const char* key, bool required = true) {
    const std::int64_t n = integer_in(obj, path, key, required);
    if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
      set_error(path, key, "expected a 32-bit integer, got " + std::to_string(n));
      return 0;
    }
    return static_cast<int>(n);
  }
  int int32(const char* key, bool required = true) { return int32_in(m_obj, "", key, required); }

  double real(const char* key, bool required = true) { return real_in(m_obj, "", key, required); }
  double real_in(const Json& obj, std::string_view path, const char* key, bool required = true) {
    const Json* v = field(obj, path, key, required);
    if (!v) return kNaN;
    if (v->is_null()) return kNaN;
    if (v->is_number()) return v->get<double>();
    set_error(path, key, "expected a number, got " + preview(*v));
    return kNaN;
  }

  std::string text(const char* key, bool required = true) {
    const Json* v = field(m_obj, "", key, required);
    if (!v) return {};
    if (v->is_string()) return v->get<std::string>();
    set_error("", key, "expected a string, got " + preview(*v));
    return {};
  }

  const Json* object(const char* key, bool required = true) {
    const Json* v = field(m_obj, "", key, required);
    if (v && !v->is_object()) {
      set_error("", key, "expected an object, got " + preview(*v));
      return nullptr;
    }
    return v;
  }

  void set_error(std::string_view path, std::string_view key, const std::string& what) {
    if (!m_error.empty()) return;
    m_error = m_kind + ".";
    if (!path.empty()) m_error.append(path).append(".");
    m_error.append(key).append(": ").append(what);
  }

 private:
  const Json& m_obj;
  std::string m_kind;
  std::string m_error;
};

// Reads one plain field: required, except an optional, which is read when the line has it.
struct Get {
  Reader& r;
  void operator()(const char* key, std::int64_t& value) const { value = r.integer(key); }
  void operator()(const char* key, double& value) const { value = r.real(key); }
  void operator()(const char* key, std::string& value) const { value = r.text(key); }
  template <class T>
  void operator()(const char* key, std::optional<T>& value) const {
    if (!r.field(r.root(), "", key, false)) return;
    T read{};
    (*this)(key, read);
    value = read;
  }
};

HelloEvent read_hello(Reader& r) {
  HelloEvent e;
  e.world_size = r.int32("world_size");
  e.local_world_size = r.int32("local_world_size");
  e.config_hash = r.text("config_hash");
  if (const Json* versions = r.object("versions")) {
    for (const auto& [name, value] : versions->items()) {
      if (!value.is_string())
        r.set_error("versions", name, "expected a string, got " + preview(value));
      else
        e.versions[name] = value.get<std::string>();
    }
  }
  if (const Json* params = r.object("params")) {
    e.params_total = r.integer_in(*params, "params", "total");
    e.params_trainable = r.integer_in(*params, "params", "trainable");
  }
  e.mem_estimate = r.integer("mem_estimate");
  if (const Json* device = r.object("device", false)) {
    DeviceSummary d;
    if (const Json* type = r.field(*device, "device", "type", true); type && type->is_string())
      d.type = type->get<std::string>();
    d.index = r.int32_in(*device, "device", "index");
    if (const Json* name = r.field(*device, "device", "name", true); name && name->is_string())
      d.name = name->get<std::string>();
    d.memory_bytes = r.integer_in(*device, "device", "memory_bytes");
    if (const Json* cap = r.field(*device, "device", "capability", false); cap && cap->is_string())
      d.capability = cap->get<std::string>();
    if (d.type != "cpu" && d.type != "cuda")
      r.set_error("device", "type", "expected \"cpu\" or \"cuda\", got \"" + d.type + "\"");
    e.device = d;
  }
  if (const Json* f = r.field(r.root(), "", "flops_per_token", false)) {
    if (f->is_number() && std::isfinite(f->get<double>()) && f->get<double>() > 0)
      e.flops_per_token = f->get<double>();
    else
      r.set_error("", "flops_per_token", "expected a positive number, got " + preview(*f));
  }
  if (const Json* f = r.field(r.root(), "", "pack_efficiency", false)) {
    if (f->is_number() && f->get<double>() > 0 && f->get<double>() <= 1)
      e.pack_efficiency = f->get<double>();
    else
      r.set_error("", "pack_efficiency", "expected a number in (0, 1], got " + preview(*f));
  }
  if (const Json* bound = r.object("data_bound", false)) {
    DataBound d;
    d.samples = r.integer_in(*bound, "data_bound", "samples");
    d.longest = r.integer_in(*bound, "data_bound", "longest");
    d.most_visual_tokens = r.integer_in(*bound, "data_bound", "most_visual_tokens");
    d.shortest_with_image = r.integer_in(*bound, "data_bound", "shortest_with_image");
    // Token counts of loaded samples: none is negative, and none exceeds the longest.
    if (d.samples < 0 || d.longest < 0 || d.most_visual_tokens < 0 || d.shortest_with_image < 0 ||
        d.most_visual_tokens > d.longest || d.shortest_with_image > d.longest)
      r.set_error("data_bound", "longest",
                  "expected token counts from 0 with none above the longest sample's");
    e.data_bound = d;
  }
  return e;
}

StepEvent read_step(Reader& r) {
  StepEvent e;
  fields(e, Get{r});
  if (const Json* comm = r.object("comm_bytes")) {
    e.all_gather_bytes = r.integer_in(*comm, "comm_bytes", "all_gather");
    e.reduce_scatter_bytes = r.integer_in(*comm, "comm_bytes", "reduce_scatter");
  }
  return e;
}

EvalEvent read_eval(Reader& r) {
  EvalEvent e;
  e.step = r.integer("step");
  if (const Json* metrics = r.object("metrics")) {
    for (const auto& [name, value] : metrics->items()) {
      e.metrics[name] = r.real_in(*metrics, "metrics", name.c_str());
    }
  }
  return e;
}

MemEvent read_mem(Reader& r) {
  MemEvent e;
  fields(e, Get{r});
  return e;
}

CkptEvent read_ckpt(Reader& r) {
  CkptEvent e;
  fields(e, Get{r});
  if (!r.failed() && e.kind != "sharded" && e.kind != "full" && e.kind != "adapter") {
    r.set_error("", "kind", "expected sharded, full or adapter, got \"" + e.kind + "\"");
  }
  return e;
}

LogEvent read_log(Reader& r) {
  LogEvent e;
  fields(e, Get{r});
  return e;
}

DoneEvent read_done(Reader& r, const Json& obj) {
  DoneEvent e;
  std::string status = r.text("status");
  if (auto s = parse_done_status(status)) {
    e.status = *s;
  } else if (!r.failed()) {
    r.set_error("", "status", "expected complete, stopped or failed, got \"" + status + "\"");
  }
  if (auto it = obj.find("objective"); it != obj.end() && !it->is_null()) {
    if (it->is_array()) {
      e.objective_is_array = true;
      for (const auto& v : *it) {
        if (v.is_null())
          e.objective.push_back(kNaN);
        else if (v.is_number())
          e.objective.push_back(v.get<double>());
        else
          r.set_error("", "objective", "expected numbers in the array, got " + preview(v));
      }
    } else if (it->is_number()) {
      e.objective.push_back(it->get<double>());
    } else {
      r.set_error("", "objective", "expected a number or an array of numbers, got " + preview(*it));
    }
  }
  if (obj.contains("steps")) e.steps = r.integer("steps");
  return e;
}

ErrorEvent read_error(Reader& r) {
  ErrorEvent e;
  std::string kind = r.text("kind");
  if (auto k = parse_error_kind(kind)) {
    e.kind = *k;
  } else if (!r.failed()) {
    r.set_error("", "kind", "expected " + error_kind_names() + ", got \"" + kind + "\"");
  }
  e.message = r.text("message");
  e.hint = r.text("hint", false);
  if (r.field(r.root(), "", "memory", false)) {
    if (const Json* memory = r.object("memory")) {
      OomMemory m;
      if (const Json* d = r.field(*memory, "memory", "device", true); d && d->is_string())
        m.device = d->get<std::string>();
      if (!r.failed() && m.device != "cpu" && m.device != "cuda")
        r.set_error("memory", "device", "expected \"cpu\" or \"cuda\", got \"" + m.device + "\"");
      m.request = r.integer_in(*memory, "memory", "request");
      m.allocated = r.integer_in(*memory, "memory", "allocated");
      m.peak = r.integer_in(*memory, "memory", "peak");
      for (auto [key, slot] :
           {std::pair{"limit", &m.limit}, std::pair{"reserved", &m.reserved},
            std::pair{"largest_free", &m.largest_free}, std::pair{"capacity", &m.capacity},
            std::pair{"device_free", &m.device_free}}) {
        if (r.field(*memory, "memory", key, false)) *slot = r.integer_in(*memory, "memory", key);
      }
      if (const Json* snap = r.field(*memory, "memory", "snapshot", false)) {
        if (snap->is_string())
          m.snapshot = snap->get<std::string>();
        else
          r.set_error("memory", "snapshot", "expected a path (a string), got " + preview(*snap));
      }
      for (auto [key, value] : {std::pair{"request", m.request},
                                std::pair{"allocated", m.allocated}, std::pair{"peak", m.peak}}) {
        if (value < 0)
          r.set_error("memory", key, "expected bytes >= 0, got " + std::to_string(value));
      }
      e.memory = m;
    }
  }
  return e;
}

PhasesEvent read_phases(Reader& r) {
  PhasesEvent e;
  fields(e, Get{r});
  return e;
}

SysEvent read_sys(Reader& r) {
  SysEvent e;
  fields(e, Get{r});
  if (r.field(r.root(), "", "gpu", false)) {
    if (const Json* gpu = r.object("gpu")) {
      GpuSample g;
      for (auto [key, slot] :
           {std::pair{"util", &g.util}, std::pair{"sm_clock_mhz", &g.sm_clock_mhz},
            std::pair{"power_w", &g.power_w}, std::pair{"power_limit_w", &g.power_limit_w},
            std::pair{"temp_c", &g.temp_c}, std::pair{"pcie_tx", &g.pcie_tx},
            std::pair{"pcie_rx", &g.pcie_rx}}) {
        if (r.field(*gpu, "gpu", key, false)) *slot = r.real_in(*gpu, "gpu", key);
      }
      if (r.field(*gpu, "gpu", "mem_used", false))
        g.mem_used = r.integer_in(*gpu, "gpu", "mem_used");
      e.gpu = g;
    }
  }
  return e;
}

SampleEvent read_sample(Reader& r) {
  SampleEvent e;
  e.step = r.integer("step");
  e.probe = r.text("probe");
  e.prompt = r.text("prompt", false);
  if (const Json* images = r.field(r.root(), "", "images", false)) {
    if (!images->is_array())
      r.set_error("", "images", "expected an array, got " + preview(*images));
    for (const auto& image : images->is_array() ? *images : Json::array()) {
      if (image.is_string())
        e.images.push_back(image.get<std::string>());
      else
        r.set_error("", "images", "expected paths (strings), got " + preview(image));
    }
  }
  e.text = r.text("text");
  e.tokens = r.integer("tokens");
  if (r.field(r.root(), "", "reference", false)) e.reference = r.text("reference");
  if (const Json* match = r.field(r.root(), "", "exact_match", false)) {
    if (match->is_boolean())
      e.exact_match = match->get<bool>();
    else
      r.set_error("", "exact_match", "expected true or false, got " + preview(*match));
  }
  if (r.field(r.root(), "", "f1", false)) e.f1 = r.real("f1");
  if (r.field(r.root(), "", "cer", false)) e.cer = r.real("cer");
  return e;
}

Result<Payload> read_payload(const std::string& kind, Reader& r, const Json& obj) {
  Payload body;
  if (kind == "hello")
    body = read_hello(r);
  else if (kind == "step")
    body = read_step(r);
  else if (kind == "eval")
    body = read_eval(r);
  else if (kind == "mem")
    body = read_mem(r);
  else if (kind == "ckpt")
    body = read_ckpt(r);
  else if (kind == "log")
    body = read_log(r);
  else if (kind == "done")
    body = read_done(r, obj);
  else if (kind == "error")
    body = read_error(r);
  else if (kind == "phases")
    body = read_phases(r);
  else if (kind == "sys")
    body = read_sys(r);
  else if (kind == "sample")
    body = read_sample(r);
  else
    return fail("ev: unknown event kind \"" + kind +
                "\" (protocol v1 has hello, step, eval, mem, ckpt, log, done, error, phases, "
                "sys, sample)");
  if (r.failed()) return fail(r.error());
  return body;
}

}  // namespace

std::string_view kind_name(const Payload& body) {
  static constexpr std::string_view kNames[] = {"hello", "step",  "eval",   "mem", "ckpt",  "log",
                                                "done",  "error", "phases", "sys", "sample"};
  return kNames[body.index()];
}

std::string encode_event(const Event& event) {
  Json out;
  out["v"] = event.env.v;
  out["ev"] = kind_name(event.body);
  out["rank"] = event.env.rank;
  out["seq"] = event.env.seq;
  out["t"] = number(event.env.t);
  std::visit(Encoder{out}, event.body);
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Event> parse_event(std::string_view line, ParseMode mode) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  Json obj = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return fail("not a JSON object: " + std::string(line.substr(0, 80)));
  if (!obj.is_object()) return fail("expected a JSON object, got " + preview(obj));
  auto ev = obj.find("ev");
  if (ev == obj.end() || !ev->is_string()) return fail("ev: missing or not a string");
  const std::string kind = ev->get<std::string>();

  const bool strict = mode == ParseMode::strict;
  Reader r(obj, kind);
  Event event;
  event.env.v = obj.contains("v") || strict ? r.int32("v") : kProtocolVersion;
  if (!r.failed() && event.env.v != kProtocolVersion) {
    return fail(kind + ".v: protocol v" + std::to_string(event.env.v) + " is not v" +
                std::to_string(kProtocolVersion) +
                "; use a shardtrain and a backend of one release");
  }
  event.env.rank = obj.contains("rank") || strict ? r.int32("rank") : 0;
  event.env.seq = obj.contains("seq") || strict ? r.integer("seq") : -1;
  event.env.t = obj.contains("t") || strict ? r.real("t") : kNaN;
  if (r.failed()) return fail(r.error());
  auto body = read_payload(kind, r, obj);
  if (!body) return body.error();
  event.body = std::move(body).value();
  return event;
}

EventWriter::EventWriter(int rank, std::FILE* out) : m_rank(rank), m_out(out) {}

std::int64_t EventWriter::next_seq() const {
  const std::lock_guard lock(m_mutex);
  return m_seq;
}

bool EventWriter::ok() const {
  const std::lock_guard lock(m_mutex);
  return m_error.empty();
}

std::string EventWriter::error() const {
  const std::lock_guard lock(m_mutex);
  return m_error;
}

bool EventWriter::write(const Payload& body) {
  const std::lock_guard lock(m_mutex);
  Event event{Envelope{kProtocolVersion, m_rank, m_seq++, unix_time_now()}, body};
  std::string line = encode_event(event);
  line.push_back('\n');
  errno = 0;
  const bool written =
      std::fwrite(line.data(), 1, line.size(), m_out) == line.size() && std::fflush(m_out) == 0;
  if (!written && m_error.empty()) {
    m_error = errno != 0 ? std::strerror(errno) : "short write";
  }
  return written;
}

double unix_time_now() {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  return static_cast<double>(ms) / 1000.0;
}

}  // namespace shardscope::spec
