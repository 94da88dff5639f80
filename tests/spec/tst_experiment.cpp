// tst_experiment: the experiment schema (spec/experiment.h) on real TOML files and
// texts: defaults, enum spellings, every validation rule's message (file:line, field, fix),
// overrides, round trip through write_experiment_toml, world-size rules, the precision table,
// config_hash and docs/config.md listing every field.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <map>
#include <sstream>

#include "spec/experiment.h"
#include "spec/experiment_query.h"
#include "spec/search_space.h"
#include "spec/sha256.h"
#include "tests/support/paths.h"

using namespace shardscope;
using namespace shardscope::spec;

namespace {

const std::string kDir =
    shardscope::testing::sourceDir().toStdString() + "/tests/spec/experiments/";
const std::string kInline = kDir + "inline.toml";  // never read: names texts parsed in memory
const std::string kData = "[data]\ntrain_path = \"data/train.jsonl\"\n";  // lines 1-2

Result<Experiment> parseInline(const std::string& text, const std::vector<std::string>& set = {}) {
  return parse_experiment(text, kInline, set);
}

// Every part must appear in the error message.
bool errorHas(const std::string& message, const QStringList& parts, QString* missing) {
  for (const QString& part : parts) {
    if (message.find(part.toStdString()) == std::string::npos) {
      *missing = part;
      return false;
    }
  }
  return true;
}

// "key = value  # doc (default: X)" lines of write_experiment_toml, per section:
// section -> key -> default text.
std::map<std::string, std::map<std::string, std::string>> writtenFields(const std::string& toml) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(toml);
  std::string line;
  std::string section;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (!line.empty() && line.front() != '#' && line.find(" = ") != std::string::npos) {
      const auto def = line.rfind("(default: ");
      const std::string value = def == std::string::npos
                                    ? std::string("?")
                                    : line.substr(def + 10, line.size() - def - 11);
      out[section][line.substr(0, line.find(" = "))] = value;
    }
  }
  return out;
}

// "| `key` | type | `default` | ..." rows under "## [section]" headings of docs/config.md.
std::map<std::string, std::map<std::string, std::string>> documentedFields(const QString& path) {
  std::map<std::string, std::map<std::string, std::string>> out;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return out;
  std::string section;
  for (const QByteArray& raw : file.readAll().split('\n')) {
    const std::string line = raw.toStdString();
    if (line.rfind("## [", 0) == 0) {
      section = line.substr(4, line.find(']') - 4);
    } else if (line.rfind("## ", 0) == 0) {
      section.clear();
    } else if (!section.empty() && line.rfind("| `", 0) == 0) {
      QStringList cells = QString::fromStdString(line).split(" | ");
      if (cells.size() < 3) continue;
      const QString key = cells[0].mid(3).chopped(1);
      QString def = cells[2].trimmed();
      if (def.startsWith('`') && def.endsWith('`')) def = def.mid(1).chopped(1);
      out[section][key.toStdString()] = def.toStdString();
    }
  }
  return out;
}

}  // namespace

class TestExperiment : public QObject {
  Q_OBJECT

 private slots:
  void sha256KnownVectors() {
    // FIPS 180-4 examples and padding boundaries (55/56/64/119/120 bytes; Python's hashlib).
    QCOMPARE(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    QCOMPARE(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    QCOMPARE(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    QCOMPARE(
        sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklm"
                   "nopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    const std::map<int, std::string> boundaries = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"}};
    for (const auto& [n, hex] : boundaries) QCOMPARE(sha256_hex(std::string(n, 'a')), hex);
    QCOMPARE(sha256_hex(std::string(1'000'000, 'a')),
             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }

  void defaults() {
    auto r = load_experiment(kDir + "minimal.toml");
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    const Experiment& e = *r;
    QCOMPARE(e.source, kDir + "minimal.toml");
    QCOMPARE(e.data.train_path, kDir + "data/train.jsonl");  // resolved, absolute
    QVERIFY(e.train == TrainSection{});
    QVERIFY(e.shard == ShardSection{});
    QVERIFY(e.lora == LoraSection{});
    QVERIFY(e.eval == EvalSection{});
    QVERIFY(e.launch == LaunchSection{});
    QVERIFY(e.model == ModelSection{});
    QVERIFY(!e.search.present);
    QCOMPARE(e.train.lr, 3e-4);
    QCOMPARE(e.shard.strategy, ShardStrategy::full_shard);
    QCOMPARE(e.experiment.name, std::string("experiment"));
  }

  void nonDefaultFile() {
    auto r = load_experiment(kDir + "full.toml");
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    const Experiment& e = *r;
    QCOMPARE(e.train.max_steps, std::int64_t{10000});          // 1e4: an integral float
    QCOMPARE(e.train.lr_schedule, LrSchedule::linear);         // "LINEAR"
    QCOMPARE(e.shard.strategy, ShardStrategy::shard_grad_op);  // "shard_grad_op"
    QCOMPARE(e.shard.param_dtype, DType::bf16);                // "bfloat16"
    QCOMPARE(e.shard.reduce_dtype, DType::fp32);               // "float32"
    QCOMPARE(e.shard.wrap_min_params, std::int64_t{1'000'000});
    QCOMPARE(e.data.eval_path, kDir + "data/eval.jsonl");  // normalized
    QCOMPARE(e.launch.env.at("NCCL_P2P_DISABLE"), std::string("1"));
    QCOMPARE(e.launch.gpus, (std::vector<int>{0, 1, 2, 3}));
    QCOMPARE(e.lora.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
    QCOMPARE(e.experiment.description,
             std::string("non-default values everywhere \"quoted\" and\ttabbed"));
  }

  void qlora() {
    // Every nf4 field away from its default is read back; the defaults are bitsandbytes'.
    const LoraSection defaults;
    QCOMPARE(defaults.quantize, std::string("none"));
    QCOMPARE(defaults.double_quant, true);
    QCOMPARE(defaults.quant_block_size, std::int64_t{64});
    QCOMPARE(defaults.quant_storage, std::string("uint8"));
    auto r = parseInline(kData +
                         "[lora]\nenabled = true\nquantize = \"nf4\"\ndouble_quant = false\n"
                         "quant_block_size = 32\nquant_storage = \"bfloat16\"\n");
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->lora.quantize, std::string("nf4"));
    QCOMPARE(r->lora.double_quant, false);
    QCOMPARE(r->lora.quant_block_size, std::int64_t{32});
    QCOMPARE(r->lora.quant_storage, std::string("bfloat16"));
    // The largest allowed block for the tiny model's 64 wide and 256 MLP, through --set.
    auto big = parseInline(kData + "[lora]\nenabled = true\n",
                           {"lora.quantize=\"nf4\"", "lora.quant_block_size=64"});
    QVERIFY2(big.ok(), big.ok() ? "" : big.message().c_str());
    QCOMPARE(big->lora.quant_block_size, std::int64_t{64});
  }

  void enumNames() {
    QCOMPARE(to_string(ShardStrategy::hybrid_shard), "HYBRID_SHARD");
    QCOMPARE(to_string(ShardStrategy::shard_grad_op), "SHARD_GRAD_OP");
    QCOMPARE(to_string(WrapPolicy::block), "block");
    QCOMPARE(to_string(BackwardPrefetch::pre), "pre");
    QCOMPARE(to_string(PrecisionMode::bf16_autocast), "bf16_autocast");
    QCOMPARE(to_string(DType::bf16), "bf16");
    QCOMPARE(to_string(LrSchedule::cosine), "cosine");
    QCOMPARE(to_string(LaunchKind::local), "local");
    for (const char* spelling : {"FULL_SHARD", "full_shard", "Full_Shard"}) {
      auto r = parseInline(kData + "[shard]\nstrategy = \"" + spelling + "\"\n");
      QVERIFY2(r.ok() && r->shard.strategy == ShardStrategy::full_shard, spelling);
    }
    const std::pair<const char*, DType> dtypes[] = {
        {"fp32", DType::fp32},     {"float32", DType::fp32}, {"bf16", DType::bf16},
        {"bfloat16", DType::bf16}, {"fp16", DType::fp16},    {"float16", DType::fp16}};
    for (const auto& [spelling, dtype] : dtypes) {
      auto r = parseInline(kData + "[shard]\nprecision = \"custom\"\nparam_dtype = \"" + spelling +
                           "\"\n");
      QVERIFY2(r.ok() && r->shard.param_dtype == dtype, spelling);
    }
  }

  void badInput_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("expected");
    const QString d = QString::fromStdString(kData);
    auto row = [](const char* name, const QString& text, const QStringList& expected) {
      QTest::newRow(name) << text << expected;
    };
    // [train]
    row("lr negative", d + "[train]\nlr = -0.1\n",
        {"inline.toml:4:6: train.lr: must be > 0 (got -0.1); use e.g. 3e-4"});
    row("lr string", d + "[train]\nlr = \"3e-4\"\n",
        {"inline.toml:4:6: train.lr: expected a number, got a string (\"3e-4\")",
         "without quotes"});
    row("lr_min above lr", d + "[train]\nlr = 1e-4\nlr_min = 1e-3\n",
        {"inline.toml:5:10: train.lr_min", "above train.lr", "lr_min = lr / 10"});
    row("lr_min constant", d + "[train]\nlr_schedule = \"constant\"\nlr_min = 1e-5\n",
        {"inline.toml:5:", "train.lr_min", "not used by train.lr_schedule = \"constant\""});
    row("beta1 one", d + "[train]\nadam_beta1 = 1.0\n",
        {"inline.toml:4:", "train.adam_beta1: must be in [0, 1) (got 1.0)", "0.9"});
    row("eps zero", d + "[train]\nadam_eps = 0\n",
        {"inline.toml:4:", "train.adam_eps: must be > 0", "1e-8"});
    row("grad_clip negative", d + "[train]\ngrad_clip = -1\n",
        {"inline.toml:4:", "train.grad_clip: must be >= 0", "0 to disable"});
    row("warmup beyond steps", d + "[train]\nmax_steps = 10\nlr_warmup_steps = 20\n",
        {"inline.toml:5:", "train.lr_warmup_steps", "more than train.max_steps (10)", "lower it"});
    row("max_steps zero", d + "[train]\nmax_steps = 0\n",
        {"inline.toml:4:", "train.max_steps: must be >= 1 (got 0); use e.g. 100"});
    row("batch float", d + "[train]\nbatch_size = 2.5\n",
        {"inline.toml:4:", "train.batch_size: expected an integer, got 2.5", "whole number"});
    row("micro above batch", d + "[train]\nbatch_size = 4\nmicro_batch_size = 8\n",
        {"inline.toml:5:", "train.micro_batch_size", "more than train.batch_size (4)"});
    row("seed negative", d + "[train]\nseed = -3\n",
        {"inline.toml:4:", "train.seed: must be >= 0"});
    row("section twice", d + "[data]\n", {"inline.toml:3:", "TOML syntax error"});
    row("threads disagree", d + "[train]\nthreads = 4\n",
        {"inline.toml:4:", "train.threads", "launch.threads_per_rank is 1", "set only one"});
    // [shard]
    row("strategy unknown", d + "[shard]\nstrategy = \"full\"\n",
        {"inline.toml:4:", "shard.strategy: unknown value \"full\"", "FULL_SHARD, SHARD_GRAD_OP",
         "did you mean \"FULL_SHARD\"?"});
    row("strategy number", d + "[shard]\nstrategy = 3\n",
        {"inline.toml:4:", "shard.strategy: expected a string, got an integer", "NO_SHARD"});
    row("inflight zero", d + "[shard]\nmax_inflight_gathers = 0\n",
        {"inline.toml:4:", "shard.max_inflight_gathers: must be >= 1"});
    row("dtype without custom", d + "[shard]\nprecision = \"bf16\"\nparam_dtype = \"fp16\"\n",
        {"inline.toml:5:", "shard.param_dtype", "only used by shard.precision = \"custom\"",
         "set precision = \"custom\""});
    row("custom mixes",
        d + "[shard]\nprecision = \"custom\"\nparam_dtype = \"bf16\"\n"
            "reduce_dtype = \"fp16\"\n",
        {"inline.toml:6:", "shard.reduce_dtype: mixes bf16 and fp16", "fp32 for reduction"});
    row("dtype unknown", d + "[shard]\nprecision = \"custom\"\nbuffer_dtype = \"half\"\n",
        {"inline.toml:5:", "shard.buffer_dtype: unknown value \"half\"", "fp32, bf16, fp16"});
    row("device unknown", d + "[shard]\ndevice = \"gpu\"\n",
        {"inline.toml:4:", "shard.device: must be \"auto\", \"cuda\" or \"cpu\" (got \"gpu\")"});
    row("backend unknown", d + "[shard]\nbackend = \"mpi\"\n",
        {"inline.toml:4:", "shard.backend: must be \"auto\", \"nccl\" or \"gloo\""});
    row("nccl on cpu", d + "[shard]\ndevice = \"cpu\"\nbackend = \"nccl\"\n",
        {"shard.backend", "needs CUDA tensors but shard.device = \"cpu\""});
    row("gpus shared without gloo", d + "[launch]\nnproc_per_node = 2\ngpus = [0]\n",
        {"inline.toml:5:", "launch.gpus: has 1 GPUs for 2 ranks",
         "with shard.backend = \"gloo\" a divisor of it"});
    row("min params unused", d + "[shard]\nwrap_min_params = 5\n",
        {"inline.toml:4:", "shard.wrap_min_params", "only used by shard.wrap_policy = \"size\""});
    row("ckpt without units",
        d + "[shard]\nwrap_policy = \"none\"\nactivation_checkpointing = true\n",
        {"inline.toml:5:", "shard.activation_checkpointing", "wrap_policy = \"block\""});
    row("precision unknown", d + "[shard]\nprecision = \"bf16_autocst\"\n",
        {"inline.toml:4:", "did you mean \"bf16_autocast\"?"});
    // [model] and [data]
    row("heads do not divide", d + "[model]\ntiny_hidden_size = 64\ntiny_heads = 5\n",
        {"inline.toml:5:", "model.tiny_heads: must divide model.tiny_hidden_size"});
    row("odd head width", d + "[model]\ntiny_hidden_size = 12\ntiny_heads = 4\n",
        {"inline.toml:5:", "model.tiny_heads", "odd head width (3)"});
    row("qwen2 without path", d + "[model]\narch = \"qwen2\"\n",
        {"inline.toml:3:1: model.path: is required for model.arch = \"qwen2\"", "config.json"});
    row("arch unknown", d + "[model]\narch = \"qwen\"\n",
        {"inline.toml:4:", "model.arch: unknown value \"qwen\"", "did you mean \"qwen2\"?"});
    row("tiny with path", d + "[model]\npath = \"qwen2-mini\"\n",
        {"inline.toml:4:", "model.path: is not used by model.arch = \"tiny\""});
    row("tiny field on qwen2",
        d + "[model]\narch = \"qwen2\"\npath = \"qwen2-mini\"\ntiny_layers = 4\n",
        {"inline.toml:6:", "model.tiny_layers: is only used by model.arch = \"tiny\""});
    row("qwen2 path without config", d + "[model]\narch = \"qwen2_vl\"\npath = \"data\"\n",
        {"inline.toml:5:", "model.path", "experiments/data has no config.json"});
    row("no train path", "[train]\nlr = 1e-3\n",
        {"inline.toml:1:1: data.train_path: is required", "train_path = \"data/train.jsonl\""});
    row("train path missing", "[data]\ntrain_path = \"nope/train.jsonl\"\n",
        {"inline.toml:2:14: data.train_path: file ", "experiments/nope/train.jsonl does not exist",
         "experiment file's folder"});
    row("train path folder", "[data]\ntrain_path = \"data\"\n",
        {"inline.toml:2:", "data.train_path", "is a folder"});
    row("format unknown", d + "format = \"jsonl\"\n",
        {"inline.toml:3:", "data.format: unknown value \"jsonl\"", "tokens, text, chat"});
    row("seq_len beyond positions", d + "seq_len = 1024\n",
        {"inline.toml:3:", "data.seq_len", "512 positions", "raise tiny_max_seq_len"});
    row("shuffle string", d + "shuffle = \"yes\"\n",
        {"inline.toml:3:", "data.shuffle: expected a boolean, got a string", "true or false"});
    row("probes need chat", d + "[eval]\nprobes = \"data/train.jsonl\"\n",
        {"inline.toml:4:", "eval.probes: probes are chat samples", "data.format = \"chat\""});
    row("probes missing", d + "format = \"chat\"\n[eval]\nprobes = \"nope.jsonl\"\n",
        {"inline.toml:5:", "eval.probes: file ", "experiments/nope.jsonl does not exist"});
    row("probe tokens zero", d + "[eval]\nprobe_max_new_tokens = 0\n",
        {"inline.toml:4:", "eval.probe_max_new_tokens: must be >= 1 (got 0)"});
    row("trace every negative", d + "[trace]\nevery_n_steps = -1\n",
        {"inline.toml:4:", "trace.every_n_steps: must be >= 0 (got -1)"});
    row("memory on oom quoted", d + "[trace]\nmemory_on_oom = \"yes\"\n",
        {"inline.toml:4:", "trace.memory_on_oom: expected a boolean, got a string",
         "true or false"});
    row("trace bound zero", d + "[trace]\nmax_mib = 0\n",
        {"inline.toml:4:", "trace.max_mib: must be >= 1 (got 0)"});
    row("notify stall negative", d + "[notify]\nstall_after_min = -1\n",
        {"inline.toml:4:", "notify.stall_after_min: must be >= 0 (got -1.0); use e.g. 30"});
    row("notify command not text", d + "[notify]\non_end = 3\n",
        {"inline.toml:4:", "notify.on_end"});
    // [lora] and [eval]
    row("lora rank zero", d + "[lora]\nenabled = true\nr = 0\n",
        {"inline.toml:5:", "lora.r: must be >= 1 (got 0)"});
    row("lora dropout one", d + "[lora]\nenabled = true\ndropout = 1.0\n",
        {"inline.toml:5:", "lora.dropout: must be in [0, 1)"});
    row("lora no targets", d + "[lora]\nenabled = true\ntarget_modules = []\n",
        {"inline.toml:5:", "lora.target_modules: is empty", "q_proj"});
    row("lora target number", d + "[lora]\ntarget_modules = [\"q_proj\", 3]\n",
        {"inline.toml:4:29: lora.target_modules[1]: expected a string, got an integer"});
    // [lora] quantize (QLoRA)
    const QString q = d + "[lora]\nenabled = true\nquantize = \"nf4\"\n";  // to line 5
    row("quantize without lora", d + "[lora]\nquantize = \"nf4\"\n",
        {"inline.toml:4:", "lora.quantize", "lora.enabled is false", "lora.enabled = true"});
    row("quantize unknown", d + "[lora]\nenabled = true\nquantize = \"nf5\"\n",
        {"inline.toml:5:", "lora.quantize: unknown value \"nf5\"", "did you mean \"nf4\"?"});
    row("quantize number", d + "[lora]\nquantize = 4\n",
        {"inline.toml:4:", "lora.quantize: expected a string, got an integer"});
    row("quant block not a power of two", q + "quant_block_size = 48\n",
        {"inline.toml:6:", "lora.quant_block_size: must be a power of two from 32 to 4096",
         "(got 48)"});
    row("quant block too small", q + "quant_block_size = 16\n",
        {"inline.toml:6:", "lora.quant_block_size", "(got 16)"});
    row("quant block zero", q + "quant_block_size = 0\n",
        {"inline.toml:6:", "lora.quant_block_size", "(got 0)"});
    row("quant block does not divide width", q + "quant_block_size = 128\n",
        {"inline.toml:6:", "lora.quant_block_size: 128 does not divide model.tiny_hidden_size (64)",
         "e.g. 64"});
    row("quant block does not divide mlp",
        d + "[model]\ntiny_intermediate_size = 96\n" +
            "[lora]\nenabled = true\nquantize = \"nf4\"\nquant_block_size = 64\n",
        {"inline.toml:8:", "lora.quant_block_size: 64 does not divide the MLP width (96",
         "down_proj", "e.g. 32"});
    row("quant storage unknown", q + "quant_storage = \"int8\"\n",
        {"inline.toml:6:", "lora.quant_storage: unknown value \"int8\"", "\"bfloat16\"",
         "did you mean \"uint8\"?"});
    row("quant field without nf4", d + "[lora]\nenabled = true\ndouble_quant = false\n",
        {"inline.toml:5:", "lora.double_quant: is only used by lora.quantize = \"nf4\""});
    row("eval without data", d + "[eval]\nevery = 10\n",
        {"inline.toml:4:", "eval.every", "needs data.eval_path", "eval.every = 0"});
    row("eval metric unknown", d + "[eval]\nmetrics = [\"perplexity\"]\n",
        {"inline.toml:4:", "eval.metrics: unknown metric \"perplexity\""});
    // [launch]
    row("ssh without hosts", d + "[launch]\nkind = \"ssh\"\n",
        {"inline.toml:3:1: launch.hosts: launch.kind = \"ssh\" needs at least one host"});
    row("ssh nnodes mismatch", d + "[launch]\nkind = \"ssh\"\nnnodes = 3\nhosts = [\"a\", \"b\"]\n",
        {"inline.toml:5:", "launch.nnodes: is 3 but launch.hosts lists 2 hosts", "nnodes = 2"});
    row("hosts on local", d + "[launch]\nhosts = [\"a\"]\n",
        {"inline.toml:4:", "launch.hosts: is only used by launch.kind = \"ssh\""});
    row("host option injection", d + "[launch]\nkind = \"ssh\"\nhosts = [\"-oProxyCommand=x\"]\n",
        {"inline.toml:5:", "launch.hosts: entry \"-oProxyCommand=x\" is not a host name"});
    row("hosts twice", d + "[launch]\nkind = \"ssh\"\nnnodes = 2\nhosts = [\"a\", \"a\"]\n",
        {"inline.toml:6:", "launch.hosts: lists \"a\" twice"});
    row("nproc zero", d + "[launch]\nnproc_per_node = 0\n",
        {"inline.toml:4:", "launch.nproc_per_node: must be in [1, 4096] (got 0)"});
    row("slurm time minutes", d + "[launch]\nkind = \"slurm\"\nslurm_time = \"25:61:00\"\n",
        {"inline.toml:5:", "launch.slurm_time: is \"25:61:00\"", "\"D-HH:MM:SS\""});
    row("slurm time day hours", d + "[launch]\nkind = \"slurm\"\nslurm_time = \"1-24:00:00\"\n",
        {"inline.toml:5:", "launch.slurm_time"});
    row("slurm time zero", d + "[launch]\nkind = \"slurm\"\nslurm_time = \"00:00:00\"\n",
        {"inline.toml:5:", "launch.slurm_time"});
    row("slurm field on local", d + "[launch]\nslurm_partition = \"gpu\"\n",
        {"inline.toml:4:", "launch.slurm_partition: is only used by launch.kind = \"slurm\""});
    row("sbatch prefix",
        d + "[launch]\nkind = \"slurm\"\nslurm_extra = [\"#SBATCH --exclusive\"]\n",
        {"inline.toml:5:", "launch.slurm_extra: entry \"#SBATCH --exclusive\"", "without"});
    row("sbatch owned option",
        d + "[launch]\nkind = \"slurm\"\nslurm_extra = [\"--time=01:00:00\"]\n",
        {"inline.toml:5:", "is generated from launch.slurm_time"});
    row("env bad name", d + "[launch]\nenv = { \"1BAD\" = \"x\" }\n",
        {"inline.toml:4:", "launch.env.1BAD: is not a valid environment variable name"});
    row("env owned", d + "[launch]\nenv = { MASTER_PORT = \"29500\" }\n",
        {"inline.toml:4:", "launch.env.MASTER_PORT: is set by the launcher"});
    row("env owned token", d + "[launch]\nenv = { SHARDSCOPE_RDZV_TOKEN = \"${T}\" }\n",
        {"inline.toml:4:", "launch.env.SHARDSCOPE_RDZV_TOKEN: is set by the launcher"});
    row("env float", d + "[launch]\nenv = { X = 1.5 }\n",
        {"inline.toml:4:", "launch.env.X: expected a string, got a float"});
    row("env literal secret", d + "[launch]\nenv = { HF_TOKEN = \"hf_abc\" }\n",
        {"inline.toml:4:", "launch.env.HF_TOKEN: looks like a secret", "\"${HF_TOKEN}\""});
    row("env literal api key", d + "[launch]\nenv = { WANDB_API_KEY = \"k\" }\n",
        {"inline.toml:4:", "launch.env.WANDB_API_KEY: looks like a secret"});
    row("env literal key suffix", d + "[launch]\nenv = { WANDB_KEY = \"k\" }\n",
        {"inline.toml:4:", "launch.env.WANDB_KEY: looks like a secret", "\"${WANDB_KEY}\""});
    row("env url with password",
        d + "[launch]\nenv = { DATA_URL = \"https://alice:pw@example.com/d\" }\n",
        {"inline.toml:4:", "launch.env.DATA_URL: is a URL with a literal user or password",
         "\"${DATA_URL}\""});
    row("env unclosed reference", d + "[launch]\nenv = { X = \"a${HOME\" }\n",
        {"inline.toml:4:", "launch.env.X: has \"${\" without a closing \"}\""});
    row("env bad reference", d + "[launch]\nenv = { X = \"${1A}\" }\n",
        {"inline.toml:4:", "launch.env.X: refers to \"${1A}\""});
    row("gpus uneven", d + "[launch]\nnproc_per_node = 2\ngpus = [0, 1, 2]\n",
        {"inline.toml:5:", "launch.gpus: has 3 GPUs for 2 ranks"});
    row("remote_dir on local", d + "[launch]\nremote_dir = \"/x\"\n",
        {"inline.toml:4:", "launch.remote_dir: is only used by launch.kind"});
    // [experiment], structure, syntax
    row("name slash", d + "[experiment]\nname = \"a/b\"\n",
        {"inline.toml:4:", "experiment.name: must not contain '/'"});
    row("section as value", "train = 5\n" + d,
        {"inline.toml:1:9: train: expected a table, got an integer", "[train]"});
    row("array of tables", d + "[[train]]\nlr = 1\n",
        {"inline.toml:3:", "train: expected a table, got an array"});
    row("syntax error", d + "[train\nlr = 1\n",
        {"inline.toml:3:", "TOML syntax error", "fix the file at that place"});
    row("unknown field", d + "[train]\nlrr = 1\n",
        {"inline.toml:4:1: unknown field train.lrr; did you mean train.lr?"});
    row("field of another section", d + "[shard]\nlr = 1\n",
        {"inline.toml:4:1: unknown field shard.lr; did you mean train.lr? (put it under [train])"});
    row("unknown far field", d + "[train]\nfoo_bar_baz = 1\n",
        {"inline.toml:4:1: unknown field train.foo_bar_baz", "docs/config.md"});
    row("unknown section", d + "[trian]\nlr = 1\n",
        {"inline.toml:3:2: unknown section [trian]; did you mean [train]?"});
    row("top-level key", "lr = 1\n" + d,
        {"inline.toml:1:1: unknown top-level key lr", "did you mean train.lr?"});
  }

  void badInput() {
    QFETCH(QString, text);
    QFETCH(QStringList, expected);
    auto r = parseInline(text.toStdString());
    QVERIFY2(!r.ok(), "the experiment was accepted");
    QString missing;
    QVERIFY2(errorHas(r.message(), expected, &missing),
             qPrintable("missing \"" + missing + "\" in:\n" + QString::fromStdString(r.message())));
  }

  void launchEnvReferencesResolveAtLaunch() {
    // A secret is written "${NAME}" and taken from the launching environment; the experiment
    // (and so the run log and trial.toml) keeps the reference, never the value.
    auto r = parseInline(
        kData +
        "[launch]\n"
        "env = { HF_TOKEN = \"${TOKEN_SRC}\", MIX = \"a-${X}-${X}-$b\", PLAIN = \"$HOME\" }\n");
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->launch.env.at("HF_TOKEN"), std::string("${TOKEN_SRC}"));
    QVERIFY(write_experiment_toml(*r).find("${TOKEN_SRC}") != std::string::npos);
    const std::map<std::string, std::string> environment = {{"TOKEN_SRC", "hf_s3cret"}, {"X", "x"}};
    const auto lookup = [&](const std::string& name) -> std::optional<std::string> {
      const auto it = environment.find(name);
      return it == environment.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    auto env = resolve_launch_env(r->launch, lookup);
    QVERIFY2(env, env ? "" : env.message().c_str());
    QCOMPARE(env->at("HF_TOKEN"), std::string("hf_s3cret"));
    QCOMPARE(env->at("MIX"), std::string("a-x-x-$b"));
    QCOMPARE(env->at("PLAIN"), std::string("$HOME"));  // only ${NAME} is a reference
    auto unset = resolve_launch_env(r->launch, [](const std::string&) { return std::nullopt; });
    QVERIFY(!unset);
    QVERIFY2(QString::fromStdString(unset.message())
                 .contains("launch.env.HF_TOKEN: refers to ${TOKEN_SRC}, which is not set"),
             unset.message().c_str());
    QVERIFY(env_name_looks_secret("AWS_SECRET_ACCESS_KEY"));
    QVERIFY(env_name_looks_secret("hf_token"));
    QVERIFY(!env_name_looks_secret("NCCL_DEBUG"));
  }

  // launch.env secrets (issue 29, item 7): names ending in _KEY, _TOKEN, _SECRET, _PASSWORD, and
  // URL values whose userinfo is literal.
  void envSecretDetection() {
    for (const char* name : {"WANDB_KEY", "openai_key", "GH_TOKEN", "DB_SECRET", "PG_PASSWORD",
                             "HF_TOKEN", "AWS_SECRET_ACCESS_KEY"})
      QVERIFY2(env_name_looks_secret(name), name);
    for (const char* name : {"NCCL_DEBUG", "KEYBOARD", "KEY", "DATASET_URL", "MONKEY_COUNT"})
      QVERIFY2(!env_name_looks_secret(name), name);
    for (const char* value :
         {"https://alice:s3cret@example.com/repo.git", "https://ghp_abc@github.com/x",
          "postgresql://alice:pw@db.example/runs?sslmode=verify-full", "redis://:pw@cache:6379/0",
          "a=1 https://u:p@h", "https://${USER}:pw@host"})
      QVERIFY2(env_value_looks_secret(value), value);
    for (const char* value :
         {"https://example.com/data", "https://${GIT_USER}:${GIT_TOKEN}@github.com/x",
          "https://host/path@not-userinfo", "user@example.com", "INFO", "",
          "https://${CREDS}@host/x", "mailto:alice@example.com"})
      QVERIFY2(!env_value_looks_secret(value), value);
  }

  void gpusSharedWithGloo() {
    // Gloo stages GPU tensors through host memory, so two ranks may share launch.gpus' one GPU.
    auto r = parseInline(kData +
                         "[shard]\nbackend = \"gloo\"\ndevice = \"cuda\"\n[launch]\n"
                         "nproc_per_node = 2\ngpus = [0]\n");
    if (!r.ok()) QFAIL(r.message().c_str());
    QCOMPARE(r->shard.backend, std::string("gloo"));
    QCOMPARE(r->shard.device, std::string("cuda"));
    auto odd = parseInline(kData +
                           "[shard]\nbackend = \"gloo\"\n[launch]\nnproc_per_node = 3\n"
                           "gpus = [0, 1]\n");
    QVERIFY(!odd.ok());
    QVERIFY(odd.message().find("launch.gpus: has 2 GPUs for 3 ranks") != std::string::npos);
  }

  void everyProblemReported() {
    auto r =
        parseInline(kData + "[train]\nlr = -1\nmax_steps = 0\n[shard]\nmax_inflight_gathers = 0\n");
    QVERIFY(!r.ok());
    QVERIFY(r.message().find("inline.toml:4:6: train.lr") != std::string::npos);
    QVERIFY(r.message().find("inline.toml:5:13: train.max_steps") != std::string::npos);
    QVERIFY(r.message().find("inline.toml:7:24: shard.max_inflight_gathers") != std::string::npos);
  }

  void unreadableFieldNotJudged() {
    // train.lr cannot be read; lr_min must not be compared with lr's default (3e-4).
    auto r = parseInline(kData + "[train]\nlr = \"fast\"\nlr_min = 1e-3\nmax_steps = 0\n");
    QVERIFY(!r.ok());
    QVERIFY2(r.message().find("train.lr: expected a number") != std::string::npos,
             r.message().c_str());
    QVERIFY2(r.message().find("train.max_steps: must be >= 1") != std::string::npos,
             r.message().c_str());
    QVERIFY2(r.message().find("lr_min") == std::string::npos, r.message().c_str());
  }

  void missingFile() {
    auto r = load_experiment(kDir + "does-not-exist.toml");
    QVERIFY(!r.ok());
    QVERIFY(r.message().find("does-not-exist.toml: cannot open the experiment file") !=
            std::string::npos);
  }

  void pathsNotChecked() {
    // A remote launch: the paths exist on the target, not here; they are still resolved.
    const std::string text = "[data]\ntrain_path = \"remote/train.jsonl\"\n";
    QVERIFY(!parse_experiment(text, kInline, {}).ok());
    auto r = parse_experiment(text, kInline, {}, LoadOptions{.check_paths = false});
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->data.train_path, kDir + "remote/train.jsonl");
  }

  void overrides() {
    auto r = load_experiment(kDir + "minimal.toml",
                             {"train.lr=1e-3", "shard.strategy=no_shard", "experiment.name=007",
                              "launch.env.NCCL_DEBUG=WARN", "lora.target_modules=[\"q_proj\"]",
                              "data.eval_path=data/eval.jsonl", "eval.every = 5",
                              "experiment.description=\"two words\"", "train.max_steps=1e3"});
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->train.lr, 1e-3);
    QCOMPARE(r->shard.strategy, ShardStrategy::no_shard);
    QCOMPARE(r->experiment.name, std::string("007"));  // a string field keeps the text
    QCOMPARE(r->experiment.description, std::string("two words"));
    QCOMPARE(r->launch.env.at("NCCL_DEBUG"), std::string("WARN"));
    QCOMPARE(r->lora.target_modules, std::vector<std::string>{"q_proj"});
    QCOMPARE(r->data.eval_path, kDir + "data/eval.jsonl");
    QCOMPARE(r->eval.every, std::int64_t{5});
    QCOMPARE(r->train.max_steps, std::int64_t{1000});
    // An override replaces the file's value.
    auto full = load_experiment(kDir + "full.toml", {"train.lr=2e-4"});
    QVERIFY2(full.ok(), full.ok() ? "" : full.message().c_str());
    QCOMPARE(full->train.lr, 2e-4);
  }

  void badOverrides_data() {
    QTest::addColumn<QString>("override");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown")
        << "train.lrr=1"
        << "--set train.lrr=1: unknown field train.lrr; did you mean train.lr?";
    QTest::newRow("no equals") << "train.lr"
                               << "--set train.lr: expected SECTION.FIELD=VALUE";
    QTest::newRow("no section") << "lr=1"
                                << "--set lr=1: expected SECTION.FIELD=VALUE";
    QTest::newRow("type") << "train.lr=abc"
                          << "--set train.lr=abc: train.lr: expected a number, got a string";
    QTest::newRow("range") << "train.lr=-1"
                           << "--set train.lr=-1: train.lr: must be > 0";
    QTest::newRow("not a table") << "train.lr.x=1"
                                 << "--set train.lr.x=1: train.lr is not a table";
    QTest::newRow("enum") << "shard.strategy=zero3"
                          << "--set shard.strategy=zero3: shard.strategy: unknown value \"zero3\"";
    QTest::newRow("unknown section") << "trian.lr=1"
                                     << "--set trian.lr=1: unknown section [trian]; did you mean "
                                        "[train]?";
  }

  void badOverrides() {
    QFETCH(QString, override);
    QFETCH(QString, expected);
    auto r = load_experiment(kDir + "minimal.toml", {override.toStdString()});
    QVERIFY(!r.ok());
    QVERIFY2(r.message().find(expected.toStdString()) != std::string::npos, r.message().c_str());
  }

  void roundTrip_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QStringList>("overrides");
    for (const char* file :
         {"minimal.toml", "full.toml", "slurm.toml", "ssh.toml", "search.toml"}) {
      QTest::newRow(file) << file << QStringList{};
    }
    QTest::newRow("overridden") << "full.toml"
                                << QStringList{"train.lr=0.1", "shard.precision=bf16_autocast",
                                               "shard.param_dtype=fp32", "shard.buffer_dtype=fp32",
                                               "launch.env.QUOTE=\"a \\\"b\\\"\\n\""};
  }

  void roundTrip() {
    QFETCH(QString, file);
    QFETCH(QStringList, overrides);
    std::vector<std::string> set;
    for (const QString& o : overrides) set.push_back(o.toStdString());
    auto first = load_experiment(kDir + file.toStdString(), set);
    QVERIFY2(first.ok(), first.ok() ? "" : first.message().c_str());
    QVERIFY(!(*first == Experiment{}));
    const std::string text = write_experiment_toml(*first);
    QTemporaryDir tmp;  // elsewhere: absolute paths must survive the move
    const std::string copy = tmp.path().toStdString() + "/trial.toml";
    std::ofstream(copy) << text;
    auto second = load_experiment(copy);
    QVERIFY2(second.ok(), second.ok() ? "" : (second.message() + "\n" + text).c_str());
    QVERIFY2(*second == *first, text.c_str());
    QCOMPARE(write_experiment_toml(*second), text);
    QCOMPARE(config_hash(*second), config_hash(*first));
  }

  void searchKeptRaw() {
    auto r = load_experiment(kDir + "search.toml");
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QVERIFY(r->search.present);
    QVERIFY(r->search.toml.rfind("[search]", 0) == 0);
    QVERIFY(r->search.toml.find("sampler = 'tpe'") != std::string::npos ||
            r->search.toml.find("sampler = \"tpe\"") != std::string::npos);
    QVERIFY(r->search.toml.find("train.lr") != std::string::npos);
    // The text kept is what the schema's own parser reads.
    auto space = spec::parse_search_space(r->search.toml, "search.toml");
    QVERIFY2(space.ok(), space.ok() ? "" : space.message().c_str());
    QCOMPARE(space->params.size(), std::size_t{2});
  }

  void world() {
    auto r = load_experiment(kDir + "minimal.toml");  // batch 8, micro 0, FULL_SHARD
    QVERIFY(r.ok());
    Experiment e = *r;
    QVERIFY(validate_for_world(e, 2, 2).ok());
    QCOMPARE(micro_batch_size_for(e.train, 2), std::int64_t{4});
    QCOMPARE(grad_accumulation_steps(e.train, 2), std::int64_t{1});
    auto three = validate_for_world(e, 3, 3);
    QVERIFY(!three.ok());
    QVERIFY2(
        three.message().find("minimal.toml: train.batch_size: 8 samples do not split evenly "
                             "over 3 ranks; use a multiple of 3 (e.g. 9)") != std::string::npos,
        three.message().c_str());
    e.train.micro_batch_size = 2;
    QVERIFY(validate_for_world(e, 2, 1).ok());
    QCOMPARE(grad_accumulation_steps(e.train, 2), std::int64_t{2});
    e.train.micro_batch_size = 3;
    auto uneven = validate_for_world(e, 2, 2);
    QVERIFY(!uneven.ok());
    QVERIFY2(
        uneven.message().find("train.micro_batch_size: train.batch_size (8) must be a multiple "
                              "of micro_batch_size x world size (3 x 2 = 6)") != std::string::npos,
        uneven.message().c_str());
    e.train.micro_batch_size = 0;
    QVERIFY(!validate_for_world(e, 0, 1).ok());
    QVERIFY(!validate_for_world(e, 2, 4).ok());
    e.train.lr = -1;  // field rules run too, for experiments built in memory
    auto field = validate_for_world(e, 2, 2);
    QVERIFY(!field.ok() && field.message().find("train.lr: must be > 0") != std::string::npos);
  }

  void hybridShape() {
    auto r = load_experiment(kDir + "slurm.toml");  // HYBRID_SHARD, 2 nodes x 4, batch 64
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    Experiment e = *r;
    QVERIFY(validate_for_launch(e).ok());
    QCOMPARE(launch_world_size(e.launch), 8);
    e.train.batch_size = 72;  // 72 % 8 == 0 but 72 % 6 == 0 too: only the node shape fails
    auto six = validate_for_world(e, 6, 4);
    QVERIFY(!six.ok());
    QVERIFY2(six.message().find("shard.strategy: HYBRID_SHARD needs the world size (6) to be a "
                                "multiple of launch.nproc_per_node (4)") != std::string::npos,
             six.message().c_str());
    auto single = validate_for_world(e, 4, 4);
    QVERIFY(!single.ok() && single.message().find("single node") != std::string::npos);
    auto one = validate_for_world(e, 4, 1);
    QVERIFY(!one.ok() && one.message().find("use NO_SHARD") != std::string::npos);
    QVERIFY(validate_for_world(e, 4, 2).ok());
    e.launch.nnodes = 1;  // the launch shape itself is one node
    QVERIFY(!validate_for_launch(e).ok());
  }

  void precisionTable() {
    auto mode = [](PrecisionMode m) {
      ShardSection s;
      s.precision = m;
      return resolve_precision(s);
    };
    using D = DType;
    QCOMPARE(mode(PrecisionMode::fp32),
             (PrecisionDTypes{D::fp32, D::fp32, D::fp32, false, D::fp32, false}));
    QCOMPARE(mode(PrecisionMode::bf16),
             (PrecisionDTypes{D::bf16, D::bf16, D::bf16, false, D::fp32, false}));
    QCOMPARE(mode(PrecisionMode::fp16_autocast),
             (PrecisionDTypes{D::fp32, D::fp32, D::fp32, true, D::fp16, true}));
    QCOMPARE(mode(PrecisionMode::bf16_autocast),
             (PrecisionDTypes{D::fp32, D::fp32, D::fp32, true, D::bf16, false}));
    QCOMPARE(mode(PrecisionMode::bf16_buffers_autocast),
             (PrecisionDTypes{D::bf16, D::fp32, D::fp32, true, D::bf16, false}));
    ShardSection custom;
    custom.precision = PrecisionMode::custom;
    custom.param_dtype = D::fp16;
    custom.buffer_dtype = D::bf16;
    QCOMPARE(resolve_precision(custom),
             (PrecisionDTypes{D::fp16, D::fp32, D::bf16, false, D::fp32, true}));
    custom.param_dtype = D::bf16;
    QCOMPARE(resolve_precision(custom).grad_scaler, false);
    custom.reduce_dtype = D::fp16;
    custom.param_dtype = D::fp32;
    QCOMPARE(resolve_precision(custom).grad_scaler, true);
  }

  void hash() {
    // An in-memory experiment (no files involved): its hash pins the trial.toml layout. A
    // deliberate change of write_experiment_toml updates this constant.
    Experiment e;
    e.data.train_path = "/data/train.jsonl";
    const std::string h = config_hash(e);
    QCOMPARE(h, sha256_hex(write_experiment_toml(e)));
    QCOMPARE(QString::fromStdString(h),  // a QString: a failure prints the new value
             QString("e60854d733800736875a1b7c598a6e85fcba00054c7948069168b7884079e961"));
    // The same settings in another order and spelling hash the same.
    auto a =
        parseInline(kData + "[train]\nlr = 1e-3\nseed = 7\n[shard]\nstrategy = \"NO_SHARD\"\n");
    auto b =
        parseInline("[shard]\nstrategy = \"no_shard\"\n[train]\nseed = 7\nlr = 0.001\n" + kData);
    QVERIFY(a.ok() && b.ok());
    QCOMPARE(config_hash(*a), config_hash(*b));
    Experiment c = *a;
    c.train.seed = 8;
    QVERIFY(config_hash(c) != config_hash(*a));
  }

  void docsListEveryField() {
    const auto written = writtenFields(write_experiment_toml(Experiment{}));
    const auto documented = documentedFields(shardscope::testing::sourceDir() + "/docs/config.md");
    QVERIFY2(!documented.empty(), "docs/config.md has no field tables");
    for (const auto& [section, fields] : written) {
      for (const auto& [key, def] : fields) {
        const QString name = QString::fromStdString(section) + "." + QString::fromStdString(key);
        QVERIFY2(documented.count(section) && documented.at(section).count(key),
                 qPrintable(name + " is not documented in docs/config.md"));
        QVERIFY2(documented.at(section).at(key) == def,
                 qPrintable(name + ": docs/config.md gives default " +
                            QString::fromStdString(documented.at(section).at(key)) +
                            ", the schema " + QString::fromStdString(def)));
      }
    }
    for (const auto& [section, fields] : documented) {
      for (const auto& [key, def] : fields) {
        QVERIFY2(written.count(section) && written.at(section).count(key),
                 qPrintable(QString::fromStdString(section) + "." + QString::fromStdString(key) +
                            " is documented but not in the schema"));
      }
    }
  }

  // experiment_query.h: what the layers above ask of a parsed experiment.
  void overridesOnAParsedExperimentMatchTheFile() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("e.toml").toStdString();
    {
      std::ofstream out(path);
      out << "[experiment]\nname = \"q\"\n"
          << kData
          << "[train]\nlr = 0.001\n\n[search]\nseed = 3\nobjectives = {\"eval.loss\" = "
             "\"minimize\"}\n[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\n"
             "high = 1e-2\n";
    }
    LoadOptions noPaths;
    noPaths.check_paths = false;
    const std::uint64_t before = experiment_file_reads();
    auto base = load_experiment(path, {"train.max_steps=9"}, noPaths);
    QVERIFY2(base, base ? "" : base.message().c_str());
    QCOMPARE(experiment_file_reads() - before, std::uint64_t{1});
    const std::vector<std::string> trial = {"train.lr=0.005", "shard.strategy=NO_SHARD"};
    auto derived = with_overrides(*base, trial, noPaths);
    QVERIFY2(derived, derived ? "" : derived.message().c_str());
    QCOMPARE(experiment_file_reads() - before, std::uint64_t{1});  // the file is not read again
    auto direct = load_experiment(path, {"train.max_steps=9", trial[0], trial[1]}, noPaths);
    QVERIFY2(direct, direct ? "" : direct.message().c_str());
    QVERIFY(*derived == *direct);
    // A bad trial value is refused as it would be in the file, naming the field.
    auto bad = with_overrides(*base, {"train.lr=-1"}, noPaths);
    QVERIFY(!bad);
    QVERIFY2(bad.message().find("train.lr") != std::string::npos, bad.message().c_str());
    // The paths check of a parsed experiment: data/train.jsonl is not beside the file.
    LoadOptions checked;
    auto missing = with_overrides(*base, {}, checked);
    QVERIFY(!missing);
    QVERIFY2(missing.message().find("data.train_path") != std::string::npos &&
                 missing.message().find("does not exist") != std::string::npos,
             missing.message().c_str());
    QVERIFY(!check_experiment_paths(*base));
    QVERIFY(QDir(dir.path()).mkpath("data"));
    QVERIFY(QFile(dir.filePath("data/train.jsonl")).open(QIODevice::WriteOnly));
    QVERIFY(check_experiment_paths(*base));
  }

  void tomlValuesAndStoredSearchSpaces() {
    const std::string search =
        "[search]\nseed = 3\nsampler = \"random\"\nobjectives = {objective = \"minimize\"}\n"
        "[search.space.x]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
    QCOMPARE(toml_value_at(search, "search.seed"), std::string("3"));
    QCOMPARE(toml_value_at(search, "search.sampler"), std::string("'random'"));
    QCOMPARE(toml_value_at(search, "search.n_trials"), std::string());  // absent
    QCOMPARE(toml_value_at("not = = toml", "search.seed"), std::string());
    // The canonical [search] alone, and a whole experiment's text (older studies kept that).
    for (const std::string& text :
         {search, "[experiment]\nname = \"old\"\n[train]\nmax_steps = 3\n" + search}) {
      auto space = stored_search_space(text, "study");
      QVERIFY2(space, space ? "" : space.message().c_str());
      QCOMPARE(space->seed, std::uint64_t{3});
      QCOMPARE(space->params.size(), std::size_t{1});
    }
    auto none = stored_search_space("[experiment]\nname = \"x\"\n", "study s");
    QVERIFY(!none);
    QVERIFY2(none.message().find("study s") != std::string::npos &&
                 none.message().find("[search]") != std::string::npos,
             none.message().c_str());
  }

  void aSearchFileIsReadForItsSearchAlone() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("s.toml").toStdString();
    {
      std::ofstream out(path);
      out << "# a driver's own parameters\n[search]\nseed = 4\nobjectives = {f = \"minimize\"}\n"
             "[search.space.x]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
    }
    const std::uint64_t before = experiment_file_reads();
    auto file = load_search_file(path);
    QVERIFY2(file, file ? "" : file.message().c_str());
    QCOMPARE(experiment_file_reads() - before, std::uint64_t{1});
    QVERIFY(file->text.rfind("# a driver", 0) == 0);
    QVERIFY2(file->search_toml.rfind("[search]", 0) == 0, file->search_toml.c_str());
    auto space = parse_search_space(file->search_toml, path);
    QVERIFY2(space, space ? "" : space.message().c_str());
    QCOMPARE(space->seed, std::uint64_t{4});
    auto missing = load_search_file(dir.filePath("none.toml").toStdString());
    QVERIFY(!missing);
    QVERIFY2(missing.message().find("none.toml") != std::string::npos, missing.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestExperiment)
#include "tst_experiment.moc"
