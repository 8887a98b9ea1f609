//===- Fmt.cpp - fmt's compiled part, once, inside the wheel --------------===//
//
// The wheel carries fmt inside its extension (no libfmt.so). Compiling fmt's
// implementation here once, with the scheduler's sources seeing only its
// declarations, replaces FMT_HEADER_ONLY, which compiled the implementation
// into every source file: a file took about 1.6x as long to build. The
// explicit instantiations are the ones fmt 9's own library makes (Debian
// 12's libfmt-dev ships fmt's headers and shared library, not its sources).
//
//===----------------------------------------------------------------------===//

#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept
    -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept
    -> dragonbox::decimal_fp<double>;

template locale_ref::locale_ref(const std::locale &loc);
template auto locale_ref::get<std::locale>() const -> std::locale;

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void buffer<char>::append(const char *, const char *);
template void vformat_to(buffer<char> &, string_view,
                         basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                         locale_ref);

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> wchar_t;
template void buffer<wchar_t>::append(const wchar_t *, const wchar_t *);

} // namespace detail
FMT_END_NAMESPACE
