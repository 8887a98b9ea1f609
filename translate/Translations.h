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

/// Whether diagnostics of the translations append the operation in generic
/// form (`--mlir-print-op-on-diagnostic`); off by default.
void setPrintOpOnDiagnostic(bool print);

} // namespace stagecraft::pipe

#endif // STAGECRAFT_TRANSLATE_TRANSLATIONS_H
