// Answer expressions (lesson/expression.hpp): a recursive-descent parser over characters (filter
// values are words like `before_reduce` or `all_reduce*`, so there is no separate lexer) and an
// evaluator over a loaded trace.
//
// Grammar:
//   top       := expr [('==' | '!=' | '<=' | '>=' | '<' | '>') expr]
//   expr      := term (('+' | '-') term)*
//   term      := unary (('*' | '/') unary)*
//   unary     := '-' unary | primary
//   primary   := number | '(' expr ')' | header | aggregate | 'run' '(' key ')' | '@' name '(' expr ')'
//   aggregate := ('count' | 'span') '(' filter ')' | fn '(' field [',' filter] ')'
//   filter    := [key '=' value (',' key '=' value)*]
//   value     := integer | '"' chars '"' | word (letters, digits and _ - . * :)
//
// Bounds: the text is at most kMaxExpressionChars long and the syntax tree at most
// kMaxExpressionDepth deep (every '(', unary '-' and binary operator in a chain is a level), so the
// recursive parser, evaluator and destructor never run out of stack on a hostile lesson file.
#include "dpscope/lesson/expression.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <variant>
#include <vector>

#include <simdjson.h>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/filter.hpp"

namespace dpscope::lesson {
namespace detail {

struct Number {
  double value = 0.0;
};
struct HeaderValue {
  std::string name;
};
struct Negate {
  std::shared_ptr<const Node> operand;
};
struct Binary {
  char op = '+';
  std::shared_ptr<const Node> lhs, rhs;
};
struct Aggregate {
  std::string function;  // count, sum, ...
  std::string field;     // "" for count and span
  EventFilter filter;
};
struct RunValue {
  std::string key;  // run(key): a key of the trace header's `run` object
};
struct Compare {
  std::string op;  // "==", "!=", "<", "<=", ">", ">="
  std::shared_ptr<const Node> lhs, rhs;
};
struct OtherRun {
  std::string scenario;  // @name(expr): `expr` on the trace of the lesson's scenario `name`
  std::shared_ptr<const Node> operand;
};
struct Node {
  std::variant<Number, HeaderValue, Negate, Binary, Aggregate, RunValue, Compare, OtherRun> value;
  int height = 0;  // operator levels at and below this node: 0 for a leaf, at most kMaxExpressionDepth
};

}  // namespace detail

namespace {

using detail::Node;
using NodePtr = std::shared_ptr<const Node>;

bool contains(const auto& names, std::string_view word) {
  return std::find(std::begin(names), std::end(names), word) != std::end(names);
}

std::string joined(const auto& names) { return fmt::format("{}", fmt::join(names, ", ")); }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  NodePtr parse() {
    if (text_.size() > kMaxExpressionChars)
      throw Error(ErrorKind::kFormat, fmt::format("is {} characters long; at most {} are allowed",
                                                  text_.size(), kMaxExpressionChars));
    NodePtr root = expr();
    skip_space();
    const size_t at = pos_;
    for (const std::string_view op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (text_.substr(pos_, op.size()) != op) continue;
      pos_ += op.size();
      NodePtr rhs = expr();
      root = make_operator(detail::Compare{std::string(op), root, rhs}, {root.get(), rhs.get()}, at);
      skip_space();
      break;
    }
    if (pos_ < text_.size()) fail(fmt::format("unexpected '{}'", text_[pos_]));
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const { fail_at(pos_, reason); }
  [[noreturn]] void fail_at(size_t pos, const std::string& reason) const {
    throw Error(ErrorKind::kFormat, fmt::format("column {}: {}", pos + 1, reason));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, std::string_view what) {
    if (!accept(c))
      fail(pos_ < text_.size() ? fmt::format("expected {}, got '{}'", what, text_[pos_])
                               : fmt::format("expected {} at the end", what));
  }
  // A leaf (a number, a header value, an aggregate).
  static NodePtr make(auto value) { return std::make_shared<const Node>(Node{std::move(value)}); }
  // An operator over `children`: one level above the deeper of them.
  NodePtr make_operator(auto value, std::initializer_list<const Node*> children, size_t at) const {
    int height = 0;
    for (const Node* child : children) height = std::max(height, child->height);
    if (height + 1 > kMaxExpressionDepth) too_deep(at);
    return std::make_shared<const Node>(Node{std::move(value), height + 1});
  }
  [[noreturn]] void too_deep(size_t at) const {
    fail_at(at, fmt::format("the expression nests more than {} levels deep (parentheses, '-' signs and "
                            "operators in a row each add one)",
                            kMaxExpressionDepth));
  }
  // Counts the parser's own recursion ('(' and unary '-'), which runs before any node exists.
  class Nesting {
   public:
    explicit Nesting(Parser& parser) : parser_(parser) {
      if (++parser_.nesting_ > kMaxExpressionDepth) parser_.too_deep(parser_.pos_ - 1);
    }
    ~Nesting() { --parser_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& parser_;
  };

  NodePtr expr() {
    NodePtr lhs = term();
    for (;;) {
      const size_t at = pos_;
      if (accept('+') || accept('-')) {
        const char op = text_[pos_ - 1];
        NodePtr rhs = term();
        lhs = make_operator(detail::Binary{op, lhs, rhs}, {lhs.get(), rhs.get()}, at);
      } else {
        return lhs;
      }
    }
  }

  NodePtr term() {
    NodePtr lhs = unary();
    for (;;) {
      const size_t at = pos_;
      if (accept('*') || accept('/')) {
        const char op = text_[pos_ - 1];
        NodePtr rhs = unary();
        lhs = make_operator(detail::Binary{op, lhs, rhs}, {lhs.get(), rhs.get()}, at);
      } else {
        return lhs;
      }
    }
  }

  NodePtr unary() {
    if (!accept('-')) return primary();
    const size_t at = pos_ - 1;
    const Nesting nesting(*this);
    NodePtr operand = unary();
    return make_operator(detail::Negate{operand}, {operand.get()}, at);
  }

  NodePtr primary() {
    skip_space();
    if (pos_ >= text_.size()) fail("expected a number, a name or '(' at the end");
    const char c = text_[pos_];
    if (accept('(')) {
      const Nesting nesting(*this);
      NodePtr inner = expr();
      expect(')', "')'");
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return make(detail::Number{number()});
    if (accept('@')) {
      const size_t at = pos_ - 1;
      const size_t start = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                     text_[pos_] == '_' || text_[pos_] == '-'))
        ++pos_;
      const std::string scenario(text_.substr(start, pos_ - start));
      if (scenario.empty()) fail("'@' needs a scenario's name: @one-gpu(span(step=1))");
      expect('(', fmt::format("'(' after '@{}'", scenario));
      const Nesting nesting(*this);
      NodePtr inner = expr();
      expect(')', "')'");
      return make_operator(detail::OtherRun{scenario, inner}, {inner.get()}, at);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      const std::string name = identifier();
      if (name == "run" && accept('(')) {
        skip_space();
        const std::string key = identifier();
        if (key.empty()) fail("run() needs a key of the run's configuration, e.g. run(devices)");
        expect(')', "')'");
        return make(detail::RunValue{key});
      }
      if (accept('(')) return aggregate(name, start);
      if (contains(kHeaderValues, name)) return make(detail::HeaderValue{name});
      if (contains(kAggregates, name))
        fail_at(start, fmt::format("'{}' needs its arguments: {}(...)", name, name));
      fail_at(start, fmt::format("unknown name '{}' (header values: {}; functions: {})", name,
                                 joined(kHeaderValues), joined(kAggregates)));
    }
    fail(fmt::format("unexpected '{}'", c));
  }

  double number() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E' ||
                                   ((text_[pos_] == '-' || text_[pos_] == '+') && pos_ > start &&
                                    (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E'))))
      ++pos_;
    double value = 0.0;
    const auto [end, error] = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (error != std::errc() || end != text_.data() + pos_)
      fail_at(start, fmt::format("'{}' is not a number", text_.substr(start, pos_ - start)));
    return value;
  }

  std::string identifier() {
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  NodePtr aggregate(const std::string& function, size_t start) {
    if (!contains(kAggregates, function))
      fail_at(start,
              fmt::format("unknown function '{}' (expected one of: {})", function, joined(kAggregates)));
    detail::Aggregate node;
    node.function = function;
    const bool takes_field = function != "count" && function != "span";
    if (takes_field) {
      skip_space();
      const size_t field_at = pos_;
      node.field = identifier();
      if (node.field.empty())
        fail(fmt::format("{}() needs a field first, e.g. {}(bytes, ...)", function, function));
      if (!contains(kFields, node.field))
        fail_at(field_at,
                fmt::format("unknown field '{}' (expected one of: {})", node.field, joined(kFields)));
      if (accept(')')) return make(std::move(node));
      expect(',', "',' or ')'");
    }
    skip_space();
    const size_t filter_at = pos_;
    if (!accept(')')) {
      do {
        filter_item(node.filter);
      } while (accept(','));
      expect(')', "',' or ')'");
    }
    node.filter.text = std::string(text_.substr(filter_at, pos_ - 1 - filter_at));
    return make(std::move(node));
  }

  void filter_item(EventFilter& filter) {
    skip_space();
    const size_t key_at = pos_;
    const std::string key = identifier();
    if (key.empty()) fail("expected a filter key (type, name, rank, ...)");
    expect('=', fmt::format("'=' after '{}'", key));
    skip_space();
    const size_t value_at = pos_;
    const FilterValue value = filter_value();
    const std::string problem = set_filter_key(filter, key, value);
    if (!problem.empty()) fail_at(problem.starts_with("unknown key") ? key_at : value_at, problem);
  }

  FilterValue filter_value() {
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const size_t close = text_.find('"', pos_ + 1);
      if (close == std::string_view::npos) fail("unterminated string");
      std::string value(text_.substr(pos_ + 1, close - pos_ - 1));
      pos_ = close + 1;
      return value;
    }
    const size_t start = pos_;
    auto word_char = [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '*' ||
             c == ':';
    };
    while (pos_ < text_.size() && word_char(text_[pos_])) ++pos_;
    const std::string_view word = text_.substr(start, pos_ - start);
    if (word.empty()) fail("expected a value after '='");
    int64_t integer = 0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), integer);
    if (error == std::errc() && end == word.data() + word.size()) return integer;
    return std::string(word);
  }

  std::string_view text_;
  size_t pos_ = 0;
  int nesting_ = 0;  // '(' and unary '-' being parsed
};

// ---- evaluation ----

bool compare(const std::string& op, double lhs, double rhs) {
  if (op == "==") return lhs == rhs;
  if (op == "!=") return lhs != rhs;
  if (op == "<") return lhs < rhs;
  if (op == "<=") return lhs <= rhs;
  if (op == ">") return lhs > rhs;
  return lhs >= rhs;
}

[[noreturn]] void cannot(const std::string& reason) {
  throw Error(ErrorKind::kInvalidArgument, fmt::format("cannot be computed: {}", reason));
}

std::optional<double> counter_value(const trace::TraceData& data, const trace::Event& e,
                                    std::string_view key) {
  if (e.type != trace::EventType::kCounter || e.payload < 0) return std::nullopt;
  for (const auto& [k, v] : data.counter_values(data.counters[static_cast<size_t>(e.payload)]))
    if (key.empty() || data.str(k) == key) return v;
  return std::nullopt;
}

// Defined at the end of this file (the phases of a hierarchical all-reduce, the chapter's moment).
std::optional<double> phase_field(const trace::TraceData& data, const trace::Event& e,
                                  std::string_view field);
double moment_now(const EvalContext& context);

std::optional<double> field_of(const trace::TraceData& data, const trace::Event& e, std::string_view field) {
  using trace::EventType;
  const bool timed = e.type == EventType::kSpan || e.type == EventType::kTransfer;
  const trace::Transfer& t = data.transfer(e);  // defaults for any other event
  if (field == "bytes") {
    if (e.type == EventType::kTransfer) return static_cast<double>(t.bytes);
    return data.arg(e, trace_key::kBytes);
  }
  if (field == "dur_ns") return timed ? std::optional<double>(static_cast<double>(e.dur_ns)) : std::nullopt;
  if (field == "dur_us")
    return timed ? std::optional<double>(static_cast<double>(e.dur_ns) / 1e3) : std::nullopt;
  if (field == "ts_ns") return static_cast<double>(e.ts_ns);
  if (field == "ts_us") return static_cast<double>(e.ts_ns) / 1e3;
  if (field == "end_ns") return static_cast<double>(e.end_ns());
  if (field == "rank") return static_cast<double>(e.rank);
  if (field == "step") return e.step >= 0 ? std::optional<double>(static_cast<double>(e.step)) : std::nullopt;
  if (field == "algo_step")
    return t.algo_step >= 0 ? std::optional<double>(static_cast<double>(t.algo_step)) : std::nullopt;
  if (field == "chunk")
    return t.chunk >= 0 ? std::optional<double>(static_cast<double>(t.chunk)) : std::nullopt;
  if (field == "coll") {
    if (t.coll >= 0) return static_cast<double>(t.coll);
    return data.arg(e, trace_key::kColl);
  }
  if (field == "sample" || field == "samples") {  // a `samples` event: its first index, its count
    if (e.type != EventType::kSamples || e.payload < 0) return std::nullopt;
    const std::vector<int64_t>& indices = data.samples[static_cast<size_t>(e.payload)].indices;
    if (field == "samples") return static_cast<double>(indices.size());
    return indices.empty() ? std::nullopt : std::optional<double>(static_cast<double>(indices.front()));
  }
  if (field == "param") {
    if (e.type == EventType::kValues && e.payload >= 0)
      return static_cast<double>(data.values[static_cast<size_t>(e.payload)].param);
    return data.arg(e, trace_key::kParam);
  }
  if (field == "value" || field == "norm") {
    if (e.type == EventType::kValues && e.payload >= 0) {
      const trace::ValueSample& sample = data.values[static_cast<size_t>(e.payload)];
      if (field == "norm") return sample.norm;
      if (!sample.values.empty()) return static_cast<double>(sample.values.front());
      return std::nullopt;
    }
    return field == "value" ? counter_value(data, e, "") : std::nullopt;
  }
  if (const std::optional<double> v = phase_field(data, e, field)) return v;
  return counter_value(data, e, field);  // loss, parameters, gradients, ...
}

double header_value(const trace::TraceData& data, const std::string& name) {
  const TraceHeader& h = data.header;
  if (name == "devices") {
    const auto gpus = std::count_if(h.devices.begin(), h.devices.end(), [](const TraceDeviceInfo& d) {
      return d.kind == "sim" || d.kind == "cuda" || d.kind == "cpu";
    });
    return static_cast<double>(gpus);
  }
  if (name == "params") return static_cast<double>(h.params.size());
  if (name == "param_bytes") {
    double bytes = 0.0;
    for (const TraceParamInfo& p : h.params) bytes += static_cast<double>(p.bytes);
    return bytes;
  }
  if (name == "buckets") return static_cast<double>(h.buckets.size());
  // steps: training steps in the trace (the largest step + 1).
  int64_t last = -1;
  for (const trace::Event& e : data.events) last = std::max<int64_t>(last, e.step);
  if (last < 0) cannot("the trace has no training step");
  return static_cast<double>(last + 1);
}

double aggregate(const trace::TraceData& data, const detail::Aggregate& a, const EvalContext& context) {
  if (a.filter.at && !context.now_ns)
    cannot(fmt::format("{}({}) uses at=, which needs a chapter's moment", a.function, a.filter.text));
  const std::vector<const trace::Event*> events = matching_events(data, a.filter, context.now_ns);
  const std::string where = a.filter.text.empty() ? "the trace" : fmt::format("'{}'", a.filter.text);
  if (events.empty() && a.filter.at) {
    // At a moment, "none yet" is an answer for count: the filter without at= must still match
    // something in the trace, so a typo is not read as zero.
    EventFilter anytime = a.filter;
    anytime.at.reset();
    if (matching_events(data, anytime).empty())
      cannot(fmt::format("{}({}) matches no event at any time", a.function, a.filter.text));
    if (a.function == "count") return 0.0;
    cannot(fmt::format("{}({}) matches no event at this moment", a.function, a.filter.text));
  }
  if (events.empty()) cannot(fmt::format("{}({}) matches no event", a.function, a.filter.text));
  if (a.function == "count") return static_cast<double>(events.size());
  if (a.function == "span") {
    int64_t begin = events.front()->ts_ns, end = events.front()->end_ns();
    for (const trace::Event* e : events) {
      begin = std::min(begin, e->ts_ns);
      end = std::max(end, e->end_ns());
    }
    return static_cast<double>(end - begin);
  }
  std::vector<double> values;
  for (const trace::Event* e : events)
    if (const std::optional<double> v = field_of(data, *e, a.field)) values.push_back(*v);
  if (values.empty())
    cannot(fmt::format("none of the {} events matching {} has a '{}'", events.size(), where, a.field));
  if (a.function == "first") return values.front();  // events are in time order
  if (a.function == "last") return values.back();
  if (a.function == "max") return *std::max_element(values.begin(), values.end());
  if (a.function == "min") return *std::min_element(values.begin(), values.end());
  double sum = 0.0;
  for (double v : values) sum += v;
  if (a.function == "sum") return sum;
  return sum / static_cast<double>(values.size());  // mean
}

double evaluate_node(const trace::TraceData& data, const Node& node, const EvalContext& context) {
  return std::visit(
      [&](const auto& n) -> double {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, detail::Number>) {
          return n.value;
        } else if constexpr (std::is_same_v<T, detail::HeaderValue>) {
          return n.name == "now_ns" ? moment_now(context) : header_value(data, n.name);
        } else if constexpr (std::is_same_v<T, detail::Negate>) {
          return -evaluate_node(data, *n.operand, context);
        } else if constexpr (std::is_same_v<T, detail::Binary>) {
          const double lhs = evaluate_node(data, *n.lhs, context);
          const double rhs = evaluate_node(data, *n.rhs, context);
          double result = 0.0;
          switch (n.op) {
            case '+': result = lhs + rhs; break;
            case '-': result = lhs - rhs; break;
            case '*': result = lhs * rhs; break;
            default:
              if (rhs == 0.0) cannot("division by zero");
              result = lhs / rhs;
          }
          if (!std::isfinite(result))
            cannot(fmt::format("{} {} {} is {}, not a finite number", lhs, n.op, rhs, result));
          return result;
        } else if constexpr (std::is_same_v<T, detail::RunValue>) {
          const RunSetting setting = run_setting(data, n.key);
          if (const auto* number = std::get_if<double>(&setting)) return *number;
          if (const auto* text = std::get_if<std::string>(&setting))
            cannot(fmt::format("run({}) is the text '{}', not a number", n.key, *text));
          cannot(fmt::format("the run's configuration has no '{}'", n.key));
        } else if constexpr (std::is_same_v<T, detail::OtherRun>) {
          const trace::TraceData* other = nullptr;
          if (context.scenarios != nullptr)
            if (const auto found = context.scenarios->find(n.scenario); found != context.scenarios->end())
              other = found->second;
          if (other == nullptr) cannot(fmt::format("no trace of the scenario '{}' here", n.scenario));
          EvalContext inner = context;
          inner.now_ns.reset();  // a moment is a time of the lesson's own trace
          return evaluate_node(*other, *n.operand, inner);
        } else if constexpr (std::is_same_v<T, detail::Compare>) {
          return compare(n.op, evaluate_node(data, *n.lhs, context), evaluate_node(data, *n.rhs, context))
                     ? 1.0
                     : 0.0;
        } else {
          return aggregate(data, n, context);
        }
      },
      node.value);
}

// True when any aggregate under `node` filters with at=.
bool reads_moment(const Node& node) {
  return std::visit(
      [](const auto& n) -> bool {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, detail::Negate>) {
          return reads_moment(*n.operand);
        } else if constexpr (std::is_same_v<T, detail::OtherRun>) {
          return false;
        } else if constexpr (std::is_same_v<T, detail::Binary> || std::is_same_v<T, detail::Compare>) {
          return reads_moment(*n.lhs) || reads_moment(*n.rhs);
        } else if constexpr (std::is_same_v<T, detail::Aggregate>) {
          return n.filter.at.has_value();
        } else if constexpr (std::is_same_v<T, detail::HeaderValue>) {
          return n.name == "now_ns";
        } else {
          return false;
        }
      },
      node.value);
}

// True when `node` reads nothing from a trace (numbers and operators only).
bool constant_node(const Node& node) {
  return std::visit(
      [](const auto& n) -> bool {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, detail::Number>) {
          return true;
        } else if constexpr (std::is_same_v<T, detail::Negate>) {
          return constant_node(*n.operand);
        } else if constexpr (std::is_same_v<T, detail::Binary> || std::is_same_v<T, detail::Compare>) {
          return constant_node(*n.lhs) && constant_node(*n.rhs);
        } else {
          return false;
        }
      },
      node.value);
}

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.text_ = std::string(text);
  e.root_ = Parser(e.text_).parse();
  // An answer made of numbers alone is known now: one that cannot be computed (1/0, 1e308 * 10)
  // is a mistake in the lesson file, not in the run.
  if (constant_node(*e.root_)) {
    try {
      (void)evaluate_node(trace::TraceData{}, *e.root_, EvalContext{});
    } catch (const Error& error) {
      throw Error(ErrorKind::kFormat, fmt::format("column 1: {}", error.what()));
    }
  }
  return e;
}

double Expression::evaluate(const trace::TraceData& data, const EvalContext& context) const {
  DPS_ASSERT(root_ != nullptr, "evaluate() on a default-constructed Expression; use Expression::parse()");
  const double value = evaluate_node(data, *root_, context);
  if (!std::isfinite(value)) cannot(fmt::format("the result is {}, not a finite number", value));
  return value;
}

std::string Expression::evaluate_text(const trace::TraceData& data, const EvalContext& context) const {
  DPS_ASSERT(root_ != nullptr,
             "evaluate_text() on a default-constructed Expression; use Expression::parse()");
  if (const auto* c = std::get_if<detail::Compare>(&root_->value))
    return fmt::format("{} {} {}", format_number(evaluate_node(data, *c->lhs, context)), c->op,
                       format_number(evaluate_node(data, *c->rhs, context)));
  return format_number(evaluate(data, context));
}

std::string Expression::run_key() const {
  if (root_ == nullptr) return "";
  const auto* run = std::get_if<detail::RunValue>(&root_->value);
  return run != nullptr ? run->key : "";
}

bool Expression::needs_moment() const { return root_ != nullptr && reads_moment(*root_); }

bool Expression::is_constant() const { return root_ != nullptr && constant_node(*root_); }

namespace {
void collect_scenarios(const Node& node, std::vector<std::string>& out) {
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, detail::Negate>) {
          collect_scenarios(*n.operand, out);
        } else if constexpr (std::is_same_v<T, detail::OtherRun>) {
          out.push_back(n.scenario);
          collect_scenarios(*n.operand, out);
        } else if constexpr (std::is_same_v<T, detail::Binary> || std::is_same_v<T, detail::Compare>) {
          collect_scenarios(*n.lhs, out);
          collect_scenarios(*n.rhs, out);
        }
      },
      node.value);
}
}  // namespace

std::vector<std::string> Expression::scenarios() const {
  std::vector<std::string> names;
  if (root_ != nullptr) collect_scenarios(*root_, names);
  return names;
}

RunSetting run_setting(const trace::TraceData& data, std::string_view key) {
  simdjson::dom::parser parser;
  simdjson::dom::element run;
  if (parser.parse(data.header.run_json).get(run) != simdjson::SUCCESS) return std::monostate{};
  simdjson::dom::object object;
  if (run.get_object().get(object) != simdjson::SUCCESS) return std::monostate{};
  simdjson::dom::element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS) return std::monostate{};
  if (value.is_number()) {
    double number = 0.0;
    if (value.get_double().get(number) == simdjson::SUCCESS) return number;
  }
  if (value.is_bool()) return value.get_bool().value_unsafe() ? 1.0 : 0.0;
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) return std::string(text);
  return simdjson::minify(value);
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  if (std::abs(value) < 1e15 && value == std::round(value))
    return fmt::format("{}", static_cast<int64_t>(value));
  if (std::abs(value) >= 1000.0) return fmt::format("{:.1f}", value);
  return fmt::format("{:.4g}", value);
}

// ---- a hierarchical all-reduce's phases, the chapter's moment (lesson 12's node stage) ----

namespace {

// rs_start_ns ... ag_end_ns: the span's ts plus its args phase_* (docs/trace-format.md
// "Hierarchical all-reduce phases"); nothing for an event without them.
std::optional<double> phase_field(const trace::TraceData& data, const trace::Event& e,
                                  std::string_view field) {
  if (field.size() < 9 || !field.ends_with("_ns") || e.type != trace::EventType::kSpan || e.payload < 0)
    return std::nullopt;
  const bool end = field.ends_with("_end_ns");
  const std::string_view phase = field.substr(0, field.find('_'));
  if (phase != "rs" && phase != "net" && phase != "ag") return std::nullopt;
  if (field != fmt::format("{}_{}_ns", phase, end ? "end" : "start")) return std::nullopt;
  std::optional<double> start;
  std::optional<double> dur;
  const std::string start_key = fmt::format("phase_{}_start_ns", phase);
  const std::string dur_key = fmt::format("phase_{}_dur_ns", phase);
  for (const auto& [key, value] : data.arg_values(data.args[static_cast<size_t>(e.payload)])) {
    if (data.str(key) == start_key) start = value;
    if (data.str(key) == dur_key) dur = value;
  }
  if (!start || !dur) return std::nullopt;
  return static_cast<double>(e.ts_ns) + *start + (end ? *dur : 0.0);
}

double moment_now(const EvalContext& context) {
  if (!context.now_ns) cannot("now_ns is a chapter's moment, and there is none here");
  return static_cast<double>(*context.now_ns);
}

}  // namespace

}  // namespace dpscope::lesson
