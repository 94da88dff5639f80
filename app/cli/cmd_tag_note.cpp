// `tag` and `note`: the tags and the note of a run, or with --study of a study (a sweep or an
// autotune), in the run log (schema 9, backend/store/runtags.h).
//   tag                      every tag of the run log, with its colour and use counts
//   tag RUN                  the run's tags
//   tag RUN +best -draft     adds best, removes draft (a bare name adds), then prints the tags
//   note RUN                 prints the note
//   note RUN "text"          replaces it; --clear empties it
// What follows RUN is taken as it stands (CLI11's prefix command), so `-draft` is a removal and
// never an option; of options there, only the verb's own (--db, --json, --study) are read.
#include <QJsonArray>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"

namespace shardscope::cli {
namespace {

using backend::TagOwner;

struct Target {
  TagOwner owner = TagOwner::run;
  qint64 id = 0;
  QString name;
};

Target findTarget(backend::RunReader& reader, const std::string& what, bool study) {
  if (!study) {
    const auto run = findRun(reader, what);
    return {TagOwner::run, run.id, run.name};
  }
  const auto found = findStudy(reader, what);
  return {TagOwner::study, found.id, found.name};
}

void printTags(const Globals& g, const Target& target, const QStringList& tags) {
  if (g.json) {
    printJson({{backend::tagOwnerName(target.owner), target.name},
               {"tags", QJsonArray::fromStringList(tags)}});
    return;
  }
  std::cout << tags.join(' ').toStdString() << '\n';
}

void listKnownTags(const Globals& g) {
  auto reader = openReader(g);
  const auto tags = orExit(reader.knownTags());
  if (g.json) {
    QJsonArray array;
    for (const auto& tag : tags) {
      array.append(QJsonObject{
          {"name", tag.name}, {"color", tag.color}, {"runs", tag.runs}, {"studies", tag.studies}});
    }
    printJson({{"tags", array}});
    return;
  }
  for (const auto& tag : tags) {
    std::cout << tag.name.toStdString() << '\t' << tag.color.toStdString() << '\t' << tag.runs
              << (tag.runs == 1 ? " run" : " runs") << '\t' << tag.studies
              << (tag.studies == 1 ? " study" : " studies") << '\n';
  }
}

void tagVerb(const Globals& g, const std::string& what, bool study,
             const std::vector<std::string>& edits) {
  if (what.empty()) {
    listKnownTags(g);
    return;
  }
  QStringList add;
  QStringList remove;
  for (const std::string& edit : edits) {
    const QString text = QString::fromStdString(edit);
    if (text.startsWith("--")) {
      exitWith(kExitUsage, "tag: " + edit +
                               " after RUN reads as a tag; options go before RUN, e.g. "
                               "shardscope-cli --json tag RUN +best");
    }
    QStringList& list = text.startsWith('-') ? remove : add;
    const QString name = text.startsWith('-') || text.startsWith('+') ? text.mid(1) : text;
    if (auto r = backend::checkTagName(name); !r) {
      exitWith(kExitUsage, r.message() + " (write +NAME to add a tag, -NAME to remove it)");
    }
    list.append(name);
  }
  if (add.isEmpty() && remove.isEmpty()) {
    auto reader = openReader(g);
    const Target target = findTarget(reader, what, study);
    printTags(g, target, orExit(reader.tags(target.owner, target.id)));
    return;
  }
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const Target target = findTarget(reader, what, study);
  orExit(store->editTags(target.owner, target.id, add, remove).get());
  printTags(g, target, orExit(reader.tags(target.owner, target.id)));
}

void noteVerb(const Globals& g, const std::string& what, bool study, std::vector<std::string> words,
              bool clear) {
  // `note RUN --clear` as well as `note --clear RUN`; any other option belongs before RUN.
  if (words.size() == 1 && words.front() == "--clear") {
    words.clear();
    clear = true;
  }
  if (!words.empty() && words.front().rfind("--", 0) == 0 && words.front().size() > 2) {
    exitWith(kExitUsage, "note: " + words.front() +
                             " after RUN reads as the note's text; options go before RUN, e.g. "
                             "shardscope-cli --json note RUN");
  }
  if (clear && !words.empty()) exitWith(kExitUsage, "note: give a text or --clear, not both");
  if (words.empty() && !clear) {
    auto reader = openReader(g);
    const Target target = findTarget(reader, what, study);
    const QString note = orExit(reader.note(target.owner, target.id)).value_or(QString());
    if (g.json) {
      printJson({{backend::tagOwnerName(target.owner), target.name}, {"note", note}});
    } else if (!note.isEmpty()) {
      std::cout << note.toStdString() << (note.endsWith('\n') ? "" : "\n");
    }
    return;
  }
  QStringList parts;
  for (const std::string& word : words) parts << QString::fromStdString(word);
  const QString text = parts.join(' ');
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const Target target = findTarget(reader, what, study);
  orExit(store->setNote(target.owner, target.id, clear ? QString() : text).get());
  if (g.json) {
    printJson(
        {{backend::tagOwnerName(target.owner), target.name}, {"note", clear ? QString() : text}});
  }
}

// --db and --json on a verb that does not fall through to shardscope-cli's own.
void addGlobalOptions(CLI::App& verb, Globals& g) {
  verb.add_option("--db", g.dbPath, "Run store, as shardscope-cli --db")->type_name("PATH|URL");
  verb.add_flag("--json", g.json, "Machine-readable output");
}

}  // namespace

void addTagNoteVerbs(CLI::App& app, Globals& g) {
  struct TagArgs {
    std::string what;
    bool study = false;
  };
  auto tagArgs = std::make_shared<TagArgs>();
  CLI::App* tag = app.add_subcommand(
      "tag",
      "Add (+NAME) or remove (-NAME) tags of a run; no change: print its tags; no RUN: "
      "every tag with its colour and counts");
  tag->add_option("RUN", tagArgs->what, "Run id or name (a study's with --study)");
  tag->add_flag("--study", tagArgs->study, "RUN names a study (a sweep or an autotune)");
  // After RUN, `-draft` is a removal, not an option: what follows RUN is left as it stands, and
  // not handed up to shardscope-cli's own options (which would refuse it), so this verb takes
  // --db and --json itself (before RUN).
  tag->prefix_command();
  tag->fallthrough(false);
  addGlobalOptions(*tag, g);
  tag->footer("Example: shardscope-cli tag exp-3 +best -draft");
  tag->callback(
      [&g, tagArgs, tag] { tagVerb(g, tagArgs->what, tagArgs->study, tag->remaining()); });

  struct NoteArgs {
    std::string what;
    bool study = false;
    bool clear = false;
  };
  auto noteArgs = std::make_shared<NoteArgs>();
  CLI::App* note = app.add_subcommand(
      "note", "Print the note of a run, or replace it with TEXT (plain text or Markdown)");
  note->add_option("RUN", noteArgs->what, "Run id or name (a study's with --study)")->required();
  note->add_flag("--study", noteArgs->study, "RUN names a study (a sweep or an autotune)");
  note->add_flag("--clear", noteArgs->clear, "Empty the note");
  note->prefix_command();  // the text is taken as it stands, even when it starts with '-'
  note->fallthrough(false);
  addGlobalOptions(*note, g);
  note->callback([&g, noteArgs, note] {
    noteVerb(g, noteArgs->what, noteArgs->study, note->remaining(), noteArgs->clear);
  });
}

}  // namespace shardscope::cli
