//===- Nesting.cpp - Bracket depth of untrusted input ---------------------===//
//
// One pass over the bytes, tracking line and column for the message.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/Nesting.h"

using namespace stagecraft::pipe::sched;

std::optional<DeepNesting>
stagecraft::pipe::sched::findDeepNesting(llvm::StringRef text, bool mlirSyntax,
                                         int maxDepth) {
  int depth = 0, line = 1, column = 0;
  bool inString = false, inComment = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      inComment = false;
      continue;
    }
    if (inComment)
      continue;
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    switch (c) {
    case '"':
      inString = true;
      break;
    case '/':
      if (mlirSyntax && i + 1 < text.size() && text[i + 1] == '/')
        inComment = true;
      break;
    case '<':
      if (!mlirSyntax)
        break;
      [[fallthrough]];
    case '(':
    case '[':
    case '{':
      if (++depth > maxDepth)
        return DeepNesting{line, column};
      break;
    case '>':
      if (!mlirSyntax || (i > 0 && text[i - 1] == '-'))
        break;
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      depth = depth > 0 ? depth - 1 : 0;
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}
