// Groups of runs (schema v12): a user's named set of runs, beside sweeps (which are groups
// already). A run can be in any number of groups; deleting a group never deletes its runs, and
// deleting a run takes it out of its groups. RunStore writes them, RunReader reads them; the names
// are checked here, once, for every caller (CLI, GUI).
#pragma once

#include <QString>

#include "spec/result.h"

namespace shardscope::backend {

/// A group of the run log, with how many runs it holds.
struct GroupRecord {
  qint64 id = 0;
  QString name;
  double createdAt = 0;  ///< unix seconds
  qint64 runs = 0;
};

/// Checks a group name: 1..64 characters, letters, digits and `_ - . /`, starting with
/// a letter or digit (as a tag's, so `group:NAME` reads unambiguously in the runs filter). The
/// error names the group and the rule.
[[nodiscard]] Result<void> checkGroupName(const QString& name);

}  // namespace shardscope::backend
