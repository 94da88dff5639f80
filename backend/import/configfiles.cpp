// Reading the imported files into one shape, a QJsonObject: YAML through libyaml (scalars typed
// as PyYAML's safe_load types them, since accelerate writes with PyYAML), JSON through
// QJsonDocument, and a command line split as a POSIX shell splits it.
#include <yaml.h>

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>

#include <memory>

#include "backend/import/importcontext.h"

namespace shardscope::backend {
namespace {

using importing::ImportContext;

// A plain (unquoted) YAML scalar typed by YAML 1.1's resolvers, as PyYAML does: null, bool
// (yes/no/on/off too, but not y/n), int and float (a float needs a '.', so 1e8 stays a string,
// as it does for PyYAML).
QJsonValue plainScalar(const QString& s) {
  static const QRegularExpression kNull(QStringLiteral("^(~|null|Null|NULL|)$"));
  static const QRegularExpression kTrue(QStringLiteral("^(yes|Yes|YES|true|True|TRUE|on|On|ON)$"));
  static const QRegularExpression kFalse(
      QStringLiteral("^(no|No|NO|false|False|FALSE|off|Off|OFF)$"));
  static const QRegularExpression kInt(QStringLiteral("^[-+]?(0|[1-9][0-9_]*)$"));
  static const QRegularExpression kFloat(
      QStringLiteral("^[-+]?([0-9][0-9_]*)?\\.[0-9_]*([eE][-+][0-9]+)?$"));
  if (kNull.match(s).hasMatch()) return QJsonValue::Null;
  if (kTrue.match(s).hasMatch()) return true;
  if (kFalse.match(s).hasMatch()) return false;
  QString digits = s;
  digits.remove(QLatin1Char('_'));
  if (kInt.match(s).hasMatch() || (kFloat.match(s).hasMatch() && s != QLatin1String("."))) {
    return digits.toDouble();
  }
  if (s == QLatin1String(".inf") || s == QLatin1String("+.inf")) return qInf();
  if (s == QLatin1String("-.inf")) return -qInf();
  return s;
}

struct YamlDoc {
  yaml_parser_t parser{};
  yaml_document_t doc{};
  bool parserReady = false;
  bool docReady = false;
  ~YamlDoc() {
    if (docReady) yaml_document_delete(&doc);
    if (parserReady) yaml_parser_delete(&parser);
  }
};

// What the walk may make of one document. libyaml loads an alias as a second reference to the
// node it names, and the walk below copies that node wherever it is referenced: ten aliases of a
// list of ten aliases, nine levels deep, is a file under 1 KB that expands to 10^9 nodes (the
// "billion laughs"). An accelerate config is a few dozen keys, so the walk stops at a bound far
// above any real file and far below a frozen window: the nodes it makes, and the bytes of their
// scalars (at most what a config file may hold, so a file without aliases never meets it).
struct YamlBudget {
  static constexpr qint64 kMaxNodes = 100000;
  qint64 nodes = 0;
  qint64 bytes = 0;
};

Result<QJsonValue> yamlNode(yaml_document_t* doc, yaml_node_t* node, const QString& file, int depth,
                            YamlBudget& budget) {
  if (!node) return QJsonValue(QJsonValue::Null);
  const std::string where = file.toStdString() + ":" + std::to_string(node->start_mark.line + 1);
  if (depth > 32) return fail(where + ": nested deeper than 32 levels (a recursive alias?)");
  if (++budget.nodes > YamlBudget::kMaxNodes) {
    return fail(file.toStdString() + ": expands to more than " +
                std::to_string(YamlBudget::kMaxNodes) +
                " nodes (aliases such as *name repeat what they name wherever they appear, so "
                "nested aliases multiply); an accelerate config has a few dozen keys: write its "
                "values out instead of nesting aliases");
  }
  if (node->type == YAML_SCALAR_NODE) budget.bytes += static_cast<qint64>(node->data.scalar.length);
  if (budget.bytes > importing::kMaxConfigBytes) {
    return fail(where +
                ": expands to more than 16 MiB of values (aliases such as *name "
                "repeat what they name wherever they appear); write the values out "
                "instead of repeating a long one through aliases");
  }
  switch (node->type) {
    case YAML_SCALAR_NODE: {
      const QString s = QString::fromUtf8(reinterpret_cast<const char*>(node->data.scalar.value),
                                          static_cast<qsizetype>(node->data.scalar.length));
      if (node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return QJsonValue(s);
      return plainScalar(s);
    }
    case YAML_SEQUENCE_NODE: {
      QJsonArray out;
      for (auto* item = node->data.sequence.items.start; item < node->data.sequence.items.top;
           ++item) {
        auto v = yamlNode(doc, yaml_document_get_node(doc, *item), file, depth + 1, budget);
        if (!v) return v;
        out.append(*v);
      }
      return QJsonValue(out);
    }
    case YAML_MAPPING_NODE: {
      QJsonObject out;
      for (auto* pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top;
           ++pair) {
        auto* keyNode = yaml_document_get_node(doc, pair->key);
        if (!keyNode || keyNode->type != YAML_SCALAR_NODE) {
          return fail(where + ": a mapping key that is not a plain name");
        }
        // A key is a copy too (an alias may name a long scalar as the key of many mappings).
        budget.bytes += static_cast<qint64>(keyNode->data.scalar.length);
        const QString key =
            QString::fromUtf8(reinterpret_cast<const char*>(keyNode->data.scalar.value),
                              static_cast<qsizetype>(keyNode->data.scalar.length));
        if (out.contains(key)) {
          return fail(file.toStdString() + ":" + std::to_string(keyNode->start_mark.line + 1) +
                      ": " + key.toStdString() + ": given twice; keep one");
        }
        auto v = yamlNode(doc, yaml_document_get_node(doc, pair->value), file, depth + 1, budget);
        if (!v) return v;
        out.insert(key, *v);
      }
      return QJsonValue(out);
    }
    case YAML_NO_NODE:
      break;
  }
  return QJsonValue(QJsonValue::Null);
}

Result<QJsonObject> parseYamlMapping(const QByteArray& text, const QString& file) {
  YamlDoc y;
  if (!yaml_parser_initialize(&y.parser)) return fail(file.toStdString() + ": out of memory");
  y.parserReady = true;
  yaml_parser_set_input_string(&y.parser, reinterpret_cast<const unsigned char*>(text.constData()),
                               static_cast<size_t>(text.size()));
  if (!yaml_parser_load(&y.parser, &y.doc)) {
    return fail(file.toStdString() + ":" + std::to_string(y.parser.problem_mark.line + 1) +
                ": not YAML: " + (y.parser.problem ? y.parser.problem : "parse error"));
  }
  y.docReady = true;
  YamlBudget budget;
  auto root = yamlNode(&y.doc, yaml_document_get_root_node(&y.doc), file, 0, budget);
  if (!root) return root.error();
  if (!root->isObject()) {
    return fail(file.toStdString() + ": expected a mapping of keys (an accelerate config file)");
  }
  return root->toObject();
}

Result<QJsonObject> parseJsonObject(const QByteArray& text, const QString& file) {
  QJsonParseError err{};
  const auto doc = QJsonDocument::fromJson(text, &err);
  if (err.error != QJsonParseError::NoError) {
    // The line of the offset, so the message points into the file.
    const int line = static_cast<int>(text.left(err.offset).count('\n')) + 1;
    return fail(file.toStdString() + ":" + std::to_string(line) +
                ": not JSON: " + err.errorString().toStdString());
  }
  if (!doc.isObject()) return fail(file.toStdString() + ": expected a JSON object");
  return doc.object();
}

// Words of a command line as a POSIX shell splits them: quotes, backslash escapes, a
// backslash-newline continuation, and # comments.
Result<QStringList> shellWords(const QString& text, const QString& file) {
  QStringList words;
  QString cur;
  bool inWord = false;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    if (c == QLatin1Char('\\') && i + 1 < text.size()) {
      if (text[i + 1] != QLatin1Char('\n')) {
        cur += text[i + 1];
        inWord = true;
      }
      ++i;
    } else if (c == QLatin1Char('\'') || c == QLatin1Char('"')) {
      const qsizetype end = text.indexOf(c, i + 1);
      if (end < 0) return fail(file.toStdString() + ": a quote that is never closed");
      cur += text.mid(i + 1, end - i - 1);
      inWord = true;
      i = end;
    } else if (c == QLatin1Char('#') && !inWord) {
      while (i < text.size() && text[i] != QLatin1Char('\n')) ++i;
    } else if (c.isSpace()) {
      if (inWord) words << cur;
      cur.clear();
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) words << cur;
  return words;
}

// `--key value`, `--key=value` and bare `--flag` (true) into an object; `what` names the part.
Result<QJsonObject> optionsOf(const QStringList& words, const QString& file, const QString& what) {
  QJsonObject out;
  for (qsizetype i = 0; i < words.size(); ++i) {
    QString w = words[i];
    if (!w.startsWith(QLatin1String("--"))) {
      return fail(file.toStdString() + ": " + w.toStdString() + ": expected an option of the " +
                  what.toStdString() + " (--name value)");
    }
    w = w.mid(2);
    QJsonValue value = true;
    if (const auto eq = w.indexOf(QLatin1Char('=')); eq >= 0) {
      value = w.mid(eq + 1);
      w = w.left(eq);
    } else if (i + 1 < words.size() && !words[i + 1].startsWith(QLatin1String("--"))) {
      value = words[++i];
    }
    w.replace(QLatin1Char('-'), QLatin1Char('_'));
    if (out.contains(w)) {
      return fail(file.toStdString() + ": --" + w.toStdString() + ": given twice; keep one");
    }
    out.insert(w, value);
  }
  return out;
}

// A command line: a launcher's options (torchrun, accelerate launch, python -m ...) up to the
// script (*.py), then the script's options; or the options alone.
Result<std::pair<QJsonObject, QJsonObject>> parseCommandLine(const QByteArray& text,
                                                             const QString& file) {
  auto words = shellWords(QString::fromUtf8(text), file);
  if (!words) return words.error();
  qsizetype script = -1;
  for (qsizetype i = 0; i < words->size(); ++i) {
    if ((*words)[i].endsWith(QLatin1String(".py"))) script = i;
  }
  QStringList launcherWords;
  QStringList argWords = *words;
  if (script >= 0) {
    argWords = words->mid(script + 1);
    for (const auto& w : words->mid(0, script)) {
      if (w.startsWith(QLatin1String("--")) || !launcherWords.isEmpty()) launcherWords << w;
    }
  } else {
    while (!argWords.isEmpty() && !argWords.first().startsWith(QLatin1String("--"))) {
      argWords.removeFirst();  // a program name before the options
    }
  }
  auto launcher = optionsOf(launcherWords, file, QStringLiteral("launcher"));
  if (!launcher) return launcher.error();
  auto args = optionsOf(argWords, file, QStringLiteral("training script"));
  if (!args) return args.error();
  return std::pair{*args, *launcher};
}

}  // namespace

Result<ImportResult> importConfigText(ImportKind kind, const QByteArray& text,
                                      const QString& fileName) {
  ImportContext ctx(fileName, kind);
  const bool json = text.trimmed().startsWith('{');
  switch (kind) {
    case ImportKind::accelerate: {
      auto root = json ? parseJsonObject(text, fileName) : parseYamlMapping(text, fileName);
      if (!root) return root.error();
      importing::importAccelerate(ctx, *root);
      break;
    }
    case ImportKind::hfTrainer: {
      if (json) {
        auto root = parseJsonObject(text, fileName);
        if (!root) return root.error();
        importing::importHfTrainer(ctx, *root, {}, false);
      } else {
        auto line = parseCommandLine(text, fileName);
        if (!line) return line.error();
        importing::importHfTrainer(ctx, line->first, line->second, true);
      }
      break;
    }
    case ImportKind::deepspeed: {
      auto root = parseJsonObject(text, fileName);
      if (!root) return root.error();
      importing::importDeepSpeed(ctx, *root);
      break;
    }
  }
  return ctx.finish();
}

Result<ImportResult> importConfig(ImportKind kind, const QString& path) {
  const QFileInfo info(path);
  if (!info.isFile()) return fail(path.toStdString() + ": not a file; give a config file");
  if (info.size() > importing::kMaxConfigBytes) {
    return fail(path.toStdString() + ": " + std::to_string(info.size()) +
                " bytes is no config file (at most 16 MiB)");
  }
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    return fail(path.toStdString() + ": cannot read: " + f.errorString().toStdString());
  }
  return importConfigText(kind, f.readAll(), path);
}

}  // namespace shardscope::backend
