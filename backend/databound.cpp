#include "backend/databound.h"

#include "backend/guithread.h"
#include "data/inspect.h"

namespace shardscope::backend {

Result<std::optional<spec::DataBound>> trainDataBound(const spec::Experiment& exp,
                                                      const std::atomic<bool>* cancel) {
  if (exp.data.format != "chat") return std::optional<spec::DataBound>();
  assertOffGuiThread("reading the training data (the memory estimate's rows)");
  return data::train_data_bound(exp, cancel);
}

std::optional<spec::DataBound> rowsBoundOf(const spec::Experiment& exp, std::string* why) {
  if (why != nullptr) why->clear();
  auto bound = trainDataBound(exp);
  if (!bound) {
    if (why != nullptr) *why = bound.message();
    return std::nullopt;
  }
  return *bound;
}

}  // namespace shardscope::backend
