// A checked list of precision rules and where it sits in the config ("precision.matmul"; rule i is
// at "<path>[i]"). Read once, when the config is read; the training loop only resolves it. `Rule`
// is MatmulRule (site_rules.h) or ElementwiseRule (elementwise_rules.h): each says what a list of
// it must be (kListExpected) and parses one rule (Rule::parse, a ConfigError naming its path).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "policy/config_error.h"

namespace drift {

template <class Rule>
class RuleList {
 public:
  RuleList() = default;  // no rules
  // Throws ConfigError (naming the rule's path) for a malformed rule list.
  RuleList(const nlohmann::json& rules, std::string path) : source_(rules), path_(std::move(path)) {
    if (!rules.is_array()) throw ConfigError(path_, Rule::kListExpected);
    for (size_t i = 0; i < rules.size(); ++i) rules_.push_back(Rule::parse(rules[i], rule_path(i)));
  }
  const std::vector<Rule>& rules() const { return rules_; }
  const std::string& path() const { return path_; }
  std::string rule_path(size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }
  // The list as written, for the resolved config.json.
  const nlohmann::json& source() const { return source_; }
  // `more` after these rules (later rules win), renumbered as one list at this list's path.
  void append(const RuleList& more) {
    rules_.insert(rules_.end(), more.rules_.begin(), more.rules_.end());
    for (const auto& r : more.source_) source_.push_back(r);
  }
  bool operator==(const RuleList& o) const { return path_ == o.path_ && source_ == o.source_; }

 private:
  nlohmann::json source_ = nlohmann::json::array();
  std::string path_;
  std::vector<Rule> rules_;
};

}  // namespace drift
