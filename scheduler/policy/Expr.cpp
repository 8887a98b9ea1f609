//===- Expr.cpp - Integer expressions of schedule policies ----------------===//
//
// See Expr.h. A recursive-descent parser over one line of text; precedence
// from loosest: or, and, not, comparison, + -, * floordiv // mod %, unary
// minus, atoms (integers, names, parentheses, min/max/select calls).
// Division floors toward negative infinity, as Python's //.
//
//===----------------------------------------------------------------------===//

#include "scheduler/policy/Expr.h"

#include "llvm/ADT/StringExtras.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

using namespace stagecraft::pipe::sched;
using Op = PolicyExpr::Op;

namespace {

llvm::Error fail(int column, const std::string &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 fmt::format("column {}: {}", column, what));
}

class Parser {
public:
  Parser(llvm::StringRef text, llvm::ArrayRef<std::string> names)
      : text(text), names(names) {}

  llvm::Expected<PolicyExpr> parse() {
    llvm::Expected<PolicyExpr> e = orExpr();
    if (!e)
      return e.takeError();
    skip();
    if (at < text.size())
      return fail(column(), fmt::format("unexpected '{}' after the expression",
                                        text.substr(at).str()));
    return e;
  }

private:
  llvm::StringRef text;
  llvm::ArrayRef<std::string> names;
  size_t at = 0;
  /// Nesting so far: parentheses, calls, unary operators.
  int depth = 0;
  static constexpr int kMaxDepth = 100;

  int column() const { return static_cast<int>(at) + 1; }
  void skip() {
    while (at < text.size() &&
           std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  }
  /// Consumes \p token (a symbol, or a word not followed by a name
  /// character) if it comes next.
  bool accept(llvm::StringRef token) {
    skip();
    if (!text.substr(at).starts_with(token))
      return false;
    if (std::isalpha(static_cast<unsigned char>(token.back()))) {
      size_t end = at + token.size();
      if (end < text.size() &&
          (std::isalnum(static_cast<unsigned char>(text[end])) ||
           text[end] == '_'))
        return false;
    }
    at += token.size();
    return true;
  }

  static PolicyExpr node(Op op, std::vector<PolicyExpr> args, int column) {
    PolicyExpr e;
    e.op = op;
    e.args = std::move(args);
    e.column = column;
    return e;
  }

  llvm::Expected<PolicyExpr> orExpr() {
    llvm::Expected<PolicyExpr> lhs = andExpr();
    while (lhs) {
      int c = column();
      if (!accept("or"))
        break;
      llvm::Expected<PolicyExpr> rhs = andExpr();
      if (!rhs)
        return rhs.takeError();
      lhs = node(Op::Or, {std::move(*lhs), std::move(*rhs)}, c);
    }
    return lhs;
  }
  llvm::Expected<PolicyExpr> andExpr() {
    llvm::Expected<PolicyExpr> lhs = notExpr();
    while (lhs) {
      int c = column();
      if (!accept("and"))
        break;
      llvm::Expected<PolicyExpr> rhs = notExpr();
      if (!rhs)
        return rhs.takeError();
      lhs = node(Op::And, {std::move(*lhs), std::move(*rhs)}, c);
    }
    return lhs;
  }
  llvm::Expected<PolicyExpr> notExpr() {
    skip();
    int c = column();
    if (depth >= kMaxDepth)
      return fail(c, fmt::format("nested deeper than {} levels", kMaxDepth));
    if (accept("not")) {
      ++depth;
      llvm::Expected<PolicyExpr> e = notExpr();
      --depth;
      if (!e)
        return e.takeError();
      return node(Op::Not, {std::move(*e)}, c);
    }
    return comparison();
  }
  llvm::Expected<PolicyExpr> comparison() {
    llvm::Expected<PolicyExpr> lhs = sum();
    if (!lhs)
      return lhs;
    static const std::pair<const char *, Op> ops[] = {
        {"<=", Op::Le}, {">=", Op::Ge}, {"==", Op::Eq},
        {"!=", Op::Ne}, {"<", Op::Lt},  {">", Op::Gt}};
    skip();
    int c = column();
    for (const auto &[token, op] : ops)
      if (accept(token)) {
        llvm::Expected<PolicyExpr> rhs = sum();
        if (!rhs)
          return rhs.takeError();
        return node(op, {std::move(*lhs), std::move(*rhs)}, c);
      }
    return lhs;
  }
  llvm::Expected<PolicyExpr> sum() {
    llvm::Expected<PolicyExpr> lhs = product();
    while (lhs) {
      skip();
      int c = column();
      Op op;
      if (accept("+"))
        op = Op::Add;
      else if (accept("-"))
        op = Op::Sub;
      else
        break;
      llvm::Expected<PolicyExpr> rhs = product();
      if (!rhs)
        return rhs.takeError();
      lhs = node(op, {std::move(*lhs), std::move(*rhs)}, c);
    }
    return lhs;
  }
  llvm::Expected<PolicyExpr> product() {
    llvm::Expected<PolicyExpr> lhs = unary();
    while (lhs) {
      skip();
      int c = column();
      Op op;
      if (accept("*"))
        op = Op::Mul;
      else if (accept("//") || accept("floordiv"))
        op = Op::FloorDiv;
      else if (accept("%") || accept("mod"))
        op = Op::Mod;
      else
        break;
      llvm::Expected<PolicyExpr> rhs = unary();
      if (!rhs)
        return rhs.takeError();
      lhs = node(op, {std::move(*lhs), std::move(*rhs)}, c);
    }
    return lhs;
  }
  llvm::Expected<PolicyExpr> unary() {
    skip();
    int c = column();
    if (depth >= kMaxDepth)
      return fail(c, fmt::format("nested deeper than {} levels", kMaxDepth));
    ++depth;
    llvm::Expected<PolicyExpr> e = unaryBody(c);
    --depth;
    return e;
  }
  llvm::Expected<PolicyExpr> unaryBody(int c) {
    if (accept("-")) {
      llvm::Expected<PolicyExpr> e = unary();
      if (!e)
        return e.takeError();
      return node(Op::Neg, {std::move(*e)}, c);
    }
    return atom();
  }
  llvm::Expected<PolicyExpr> atom() {
    skip();
    int c = column();
    if (at >= text.size())
      return fail(c, "expected a number, a name or '(' but the text ended");
    if (accept("(")) {
      llvm::Expected<PolicyExpr> e = orExpr();
      if (!e)
        return e;
      if (!accept(")"))
        return fail(column(), "expected ')'");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(text[at]))) {
      size_t end = at;
      while (end < text.size() &&
             std::isdigit(static_cast<unsigned char>(text[end])))
        ++end;
      PolicyExpr e;
      if (end - at > 15)
        return fail(c, "integer too large");
      e.value = std::stoll(text.slice(at, end).str());
      e.column = c;
      at = end;
      return e;
    }
    if (!std::isalpha(static_cast<unsigned char>(text[at])) && text[at] != '_')
      return fail(c, fmt::format("expected a number, a name or '(' at '{}'",
                                 text.substr(at, 1).str()));
    size_t end = at;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) ||
            text[end] == '_'))
      ++end;
    std::string word = text.slice(at, end).str();
    at = end;
    if (word == "min" || word == "max" || word == "select") {
      if (!accept("("))
        return fail(column(), fmt::format("expected '(' after {}", word));
      std::vector<PolicyExpr> args;
      do {
        llvm::Expected<PolicyExpr> a = orExpr();
        if (!a)
          return a.takeError();
        args.push_back(std::move(*a));
      } while (accept(","));
      if (!accept(")"))
        return fail(column(), fmt::format("expected ',' or ')' in {}", word));
      if (word == "select" && args.size() != 3)
        return fail(c, fmt::format("select takes 3 arguments (condition, "
                                   "then, else), not {}",
                                   args.size()));
      if (word != "select" && args.size() < 2)
        return fail(c, fmt::format("{} takes 2 arguments or more", word));
      return node(word == "min"   ? Op::Min
                  : word == "max" ? Op::Max
                                  : Op::Select,
                  std::move(args), c);
    }
    if (llvm::find(names, word) == names.end())
      return fail(c, fmt::format("unknown name '{}'; known: {}", word,
                                 llvm::join(names, ", ")));
    PolicyExpr e;
    e.op = Op::Name;
    e.name = std::move(word);
    e.column = c;
    return e;
  }
};

const char *symbol(Op op) {
  switch (op) {
  case Op::Add:
    return "+";
  case Op::Sub:
    return "-";
  case Op::Mul:
    return "*";
  case Op::FloorDiv:
    return "//";
  case Op::Mod:
    return "%";
  case Op::Lt:
    return "<";
  case Op::Le:
    return "<=";
  case Op::Gt:
    return ">";
  case Op::Ge:
    return ">=";
  case Op::Eq:
    return "==";
  case Op::Ne:
    return "!=";
  case Op::And:
    return "and";
  case Op::Or:
    return "or";
  default:
    return "?";
  }
}

} // namespace

std::string PolicyExpr::str() const {
  switch (op) {
  case Op::Const:
    return std::to_string(value);
  case Op::Name:
    return name;
  case Op::Neg:
    return "-" + args[0].str();
  case Op::Not:
    return "not " + args[0].str();
  case Op::Min:
  case Op::Max:
  case Op::Select: {
    std::vector<std::string> parts;
    for (const PolicyExpr &a : args)
      parts.push_back(a.str());
    return std::string(op == Op::Min   ? "min"
                       : op == Op::Max ? "max"
                                       : "select") +
           "(" + llvm::join(parts, ", ") + ")";
  }
  default:
    return "(" + args[0].str() + " " + symbol(op) + " " + args[1].str() + ")";
  }
}

llvm::Expected<PolicyExpr>
stagecraft::pipe::sched::parsePolicyExpr(llvm::StringRef text,
                                         llvm::ArrayRef<std::string> names) {
  return Parser(text, names).parse();
}

llvm::Expected<int64_t> stagecraft::pipe::sched::evaluatePolicyExpr(
    const PolicyExpr &e,
    llvm::function_ref<std::optional<int64_t>(llvm::StringRef)> lookup) {
  auto arg = [&](int k) { return evaluatePolicyExpr(e.args[k], lookup); };
  switch (e.op) {
  case Op::Const:
    return e.value;
  case Op::Name: {
    if (std::optional<int64_t> v = lookup(e.name))
      return *v;
    return fail(e.column, fmt::format("'{}' has no value here", e.name));
  }
  case Op::Neg:
  case Op::Not: {
    llvm::Expected<int64_t> a = arg(0);
    if (!a)
      return a;
    if (e.op == Op::Neg && *a == std::numeric_limits<int64_t>::min())
      return fail(e.column, fmt::format("integer overflow in {}", e.str()));
    return e.op == Op::Neg ? -*a : int64_t(*a == 0);
  }
  case Op::Select: {
    llvm::Expected<int64_t> c = arg(0);
    if (!c)
      return c;
    return arg(*c != 0 ? 1 : 2);
  }
  case Op::Min:
  case Op::Max: {
    std::optional<int64_t> out;
    for (size_t k = 0; k < e.args.size(); ++k) {
      llvm::Expected<int64_t> a = arg(k);
      if (!a)
        return a;
      out = !out              ? *a
            : e.op == Op::Min ? std::min(*out, *a)
                              : std::max(*out, *a);
    }
    return *out;
  }
  default:
    break;
  }
  llvm::Expected<int64_t> a = arg(0);
  if (!a)
    return a;
  // Short-circuit: `b != 0 and a // b > 1` must not divide by zero.
  if (e.op == Op::And && *a == 0)
    return int64_t(0);
  if (e.op == Op::Or && *a != 0)
    return int64_t(1);
  llvm::Expected<int64_t> b = arg(1);
  if (!b)
    return b;
  int64_t x = *a, y = *b, out = 0;
  auto overflow = [&] {
    return fail(e.column, fmt::format("integer overflow in {}", e.str()));
  };
  switch (e.op) {
  case Op::Add:
    if (__builtin_add_overflow(x, y, &out))
      return overflow();
    return out;
  case Op::Sub:
    if (__builtin_sub_overflow(x, y, &out))
      return overflow();
    return out;
  case Op::Mul:
    if (__builtin_mul_overflow(x, y, &out))
      return overflow();
    return out;
  case Op::FloorDiv:
  case Op::Mod: {
    if (y == 0)
      return fail(e.column, fmt::format("division by zero in {}", e.str()));
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      return overflow();
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return e.op == Op::FloorDiv ? q : r;
  }
  case Op::Lt:
    return int64_t(x < y);
  case Op::Le:
    return int64_t(x <= y);
  case Op::Gt:
    return int64_t(x > y);
  case Op::Ge:
    return int64_t(x >= y);
  case Op::Eq:
    return int64_t(x == y);
  case Op::Ne:
    return int64_t(x != y);
  case Op::And:
  case Op::Or:
    return int64_t(y != 0);
  default:
    return fail(e.column, "unknown operation");
  }
}
