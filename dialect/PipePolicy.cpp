//===- PipePolicy.cpp - pipe.policy ---------------------------------------===//
//
// The policy op's syntax and verifier, and its bridge to the scheduler's
// policies (scheduler/policy): the op holds a policy file's statements, one
// string each; the symbol is the policy's name.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeModel.h"
#include "dialect/PipeOps.h"

#include "scheduler/policy/Policy.h"

#include "llvm/ADT/StringExtras.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <fmt/format.h>

using namespace mlir;
using namespace stagecraft::pipe;

namespace {

/// A message of the policy parser with its place: `line N: what` or
/// `line N, column C: what` (line 1 is `policy NAME`, statement k the line
/// k + 1).
struct PolicyMessage {
  /// 0-based statement, -1 when the message names no line past the first.
  int statement = -1;
  /// 1-based column within the statement; 0 when not given.
  int column = 0;
  std::string what;
};

PolicyMessage locate(StringRef message) {
  PolicyMessage located;
  located.what = message.str();
  StringRef rest = message;
  if (!rest.consume_front("line "))
    return located;
  size_t digits = rest.find_first_not_of("0123456789");
  int line = 0;
  if (digits == 0 || digits == StringRef::npos ||
      rest.take_front(digits).getAsInteger(10, line) || line < 2)
    return located;
  rest = rest.drop_front(digits);
  if (rest.consume_front(", column ")) {
    size_t end = rest.find_first_not_of("0123456789");
    if (end == 0 || end == StringRef::npos ||
        rest.take_front(end).getAsInteger(10, located.column))
      return located;
    rest = rest.drop_front(end);
  }
  if (!rest.consume_front(":"))
    return located;
  located.statement = line - 2;
  located.what = rest.ltrim().str();
  return located;
}

std::string policyText(StringRef name, ArrayRef<Attribute> statements) {
  std::string text = "policy " + name.str();
  for (Attribute s : statements)
    text += "\n" + cast<StringAttr>(s).getValue().str();
  return text;
}

} // namespace

std::string stagecraft::pipe::describePolicyMessage(StringRef message) {
  // "line N" -> "statement N - 1", wherever the message names a line.
  std::string out;
  StringRef rest = message;
  for (;;) {
    size_t at = rest.find("line ");
    if (at == StringRef::npos) {
      out += rest.str();
      return out;
    }
    out += rest.take_front(at).str();
    rest = rest.drop_front(at + 5);
    size_t digits = rest.find_first_not_of("0123456789");
    if (digits == StringRef::npos)
      digits = rest.size();
    int line = 0;
    if (digits == 0 || rest.take_front(digits).getAsInteger(10, line)) {
      out += "line ";
      continue;
    }
    out += line <= 1 ? std::string("the policy's name")
                     : fmt::format("statement {}", line - 1);
    rest = rest.drop_front(digits);
  }
}

llvm::Expected<sched::Policy> stagecraft::pipe::policyFromOp(PolicyOp op) {
  return sched::parsePolicy(op.getText());
}

std::string PolicyOp::getText() {
  return policyText(getSymName(), getStatements().getValue());
}

ParseResult PolicyOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *context = parser.getContext();
  SMLoc nameLoc = parser.getCurrentLocation();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes) ||
      parser.parseLBrace())
    return failure();
  SmallVector<Attribute> statements;
  SmallVector<SMLoc> locs;
  while (failed(parser.parseOptionalRBrace())) {
    SMLoc loc = parser.getCurrentLocation();
    std::string statement;
    if (parser.parseString(&statement))
      return failure();
    if (StringRef(statement).contains('\n'))
      return parser.emitError(loc) << "a policy statement is one line";
    statements.push_back(StringAttr::get(context, statement));
    locs.push_back(loc);
  }
  // A malformed statement is an error at its column (the string's quote is
  // column 0).
  llvm::Expected<sched::Policy> policy =
      sched::parsePolicy(policyText(name.getValue(), statements));
  if (!policy) {
    PolicyMessage m = locate(llvm::toString(policy.takeError()));
    if (m.statement < 0 || m.statement >= static_cast<int>(locs.size()))
      return parser.emitError(nameLoc) << describePolicyMessage(m.what);
    SMLoc at = locs[m.statement];
    if (m.column > 0)
      at = SMLoc::getFromPointer(at.getPointer() + m.column);
    return parser.emitError(at) << describePolicyMessage(m.what);
  }
  result.addAttribute(getStatementsAttrName(result.name),
                      ArrayAttr::get(context, statements));
  return success();
}

void PolicyOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getSymNameAttrName(), getStatementsAttrName()});
  p << " {";
  p.increaseIndent();
  for (Attribute s : getStatements()) {
    p.printNewline();
    p.printString(cast<StringAttr>(s).getValue());
  }
  p.decreaseIndent();
  p.printNewline();
  p << "}";
}

LogicalResult PolicyOp::verify() {
  for (Attribute s : getStatements())
    if (cast<StringAttr>(s).getValue().contains('\n'))
      return emitOpError() << "a policy statement is one line";
  llvm::Expected<sched::Policy> policy = policyFromOp(*this);
  if (!policy)
    return emitOpError() << describePolicyMessage(
               llvm::toString(policy.takeError()));
  return success();
}
