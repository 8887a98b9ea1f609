//===- Translations.h - pipe IR translations --------------------*- C++ -*-===//
//
// Registration of the translations between `pipe` IR and other formats:
// PyTorch pipelining CSV (both ways), Chrome trace JSON and a text summary.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_TRANSLATE_TRANSLATIONS_H
#define STAGECRAFT_TRANSLATE_TRANSLATIONS_H

namespace stagecraft::pipe {

/// Registers --pipe-to-csv, --pipe-from-csv, --pipe-to-chrome-trace and
/// --pipe-to-summary with their command-line options.
void registerPipeTranslations();

} // namespace stagecraft::pipe

#endif // STAGECRAFT_TRANSLATE_TRANSLATIONS_H
