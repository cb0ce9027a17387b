/* core/text: what reaches a terminal. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/text.h"

static const char *san(const char *in, int nl) {
    static char out[512];
    text_sanitize(in, out, sizeof out, nl);
    return out;
}

Test(text, escapes_c0_and_del) {
    cr_assert_str_eq(san("a\x1b]0;pwned\x07z", 1), "a\\x1b]0;pwned\\x07z");
    cr_assert_str_eq(san("\x1b[2J", 1), "\\x1b[2J");
    cr_assert_str_eq(san("x\x7fy\rz", 1), "x\\x7fy\\x0dz");
}

Test(text, newline_kept_only_when_asked) {
    cr_assert_str_eq(san("a\nb\tc", 1), "a\nb\tc");
    cr_assert_str_eq(san("a\nb\tc", 0), "a\\x0ab\tc");
}

Test(text, keeps_valid_utf8) {
    cr_assert_str_eq(san("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 1), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

Test(text, escapes_c1_and_invalid_utf8) {
    cr_assert_str_eq(san("\xc2\x9b" "2J", 1), "\\xc2\\x9b2J");       /* CSI as U+009B */
    cr_assert_str_eq(san("\xff\xfe", 1), "\\xff\\xfe");              /* never UTF-8 */
    cr_assert_str_eq(san("\xc0\xaf", 1), "\\xc0\\xaf");              /* overlong '/' */
    cr_assert_str_eq(san("\xed\xa0\x80", 1), "\\xed\\xa0\\x80");     /* a surrogate */
    cr_assert_str_eq(san("\xf4\x90\x80\x80", 1), "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
    cr_assert_str_eq(san("ab\xe2\x82", 1), "ab\\xe2\\x82");          /* cut short */
    cr_assert_str_eq(san("\x80x", 1), "\\x80x");                     /* a lone continuation byte */
}

Test(text, truncates_at_a_boundary) {
    char out[8];
    size_t n = text_sanitize("abc\x1b\x1b\x1b", out, sizeof out, 1);
    cr_assert_eq(n, strlen(out));
    cr_assert_str_eq(out, "abc\\x1b"); /* the next escape would not fit whole */
    n = text_sanitize("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", out, 6, 1);
    cr_assert_str_eq(out, "\xc3\xa9\xc3\xa9");
}
