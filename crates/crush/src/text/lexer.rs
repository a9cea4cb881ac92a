//! Source preparation and the scanner primitives of the crushmap grammar.
//!
//! `crushtool -c` does not tokenize: it strips `#` comments line by line, squashes every run of
//! whitespace to one space, glues the lines together with single spaces and hands the result to
//! a Boost.Spirit (classic) grammar that skips spaces between primitives. Keywords are matched as
//! plain prefixes (no word boundary), names, integers and reals are greedy lexemes. We do the very
//! same so that exactly the same texts are accepted; [`Cursor`] offers those primitives over the
//! joined text and remembers where in the source each byte came from, for error lines.
//!
//! Numeric conversions copy the C library calls Ceph makes (`strtol` then a cast to `int`,
//! `strtof`, float to unsigned conversion as x86-64 compiles it), because the resulting bits end
//! up in the binary map.

/// The comment-stripped, whitespace-squashed source, with a byte offset -> line table.
pub(crate) struct Source {
    pub text: String,
    /// `(offset in text, 1-based line)`, ascending by offset: the line each stretch starts on.
    line_starts: Vec<(usize, usize)>,
    last_content_line: usize,
}

impl Source {
    /// Prepare `source` as `CrushCompiler::compile` does.
    pub fn new(source: &str) -> Self {
        let mut text = String::with_capacity(source.len());
        let mut line_starts = Vec::new();
        let mut last_content_line = 1;
        for (index, raw_line) in source.split('\n').enumerate() {
            let without_comment = match raw_line.find('#') {
                Some(at) => &raw_line[..at],
                None => raw_line,
            };
            let squashed = squash_whitespace(without_comment);
            if !squashed.is_empty() && !text.is_empty() && !text.ends_with(' ') {
                text.push(' ');
            }
            line_starts.push((text.len(), index + 1));
            if !squashed.is_empty() {
                last_content_line = index + 1;
            }
            text.push_str(&squashed);
        }
        Self {
            text,
            line_starts,
            last_content_line,
        }
    }

    /// The 1-based source line of byte `offset` of [`Source::text`]; past the end, the last
    /// line that holds anything.
    pub fn line_of(&self, offset: usize) -> usize {
        if offset >= self.text.len() {
            return self.last_content_line;
        }
        // Empty lines share their start with the next line's text, so the last entry starting
        // at or before `offset` is the line that holds the byte.
        let index = self
            .line_starts
            .partition_point(|&(start, _)| start <= offset);
        index
            .checked_sub(1)
            .and_then(|i| self.line_starts.get(i))
            .map_or(1, |&(_, line)| line)
    }
}

/// `consolidate_whitespace`: every run of whitespace becomes one space; leading and trailing
/// runs vanish.
fn squash_whitespace(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_space = false;
    for c in line.chars() {
        if c.is_ascii_whitespace() || c == '\u{b}' {
            in_space = true;
        } else {
            if in_space && !out.is_empty() {
                out.push(' ');
            }
            in_space = false;
            out.push(c);
        }
    }
    out
}

/// What the parser wanted where it failed (for the "expected ..." part of an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expected {
    Literal(&'static str),
    Name,
    UnsignedInteger,
    NegativeInteger,
    Integer,
    Real,
    End,
}

impl Expected {
    pub fn describe(self) -> String {
        match self {
            Self::Literal(word) => format!("'{word}'"),
            Self::Name => "a name".into(),
            Self::UnsignedInteger => "a non-negative integer".into(),
            Self::NegativeInteger => "a negative integer".into(),
            Self::Integer => "an integer".into(),
            Self::Real => "a number".into(),
            Self::End => "end of input".into(),
        }
    }
}

/// A position in [`Source::text`] plus the farthest failure seen so far (PEG error reporting:
/// the failure that got farthest is almost always the real mistake).
pub(crate) struct Cursor<'s> {
    bytes: &'s [u8],
    pub position: usize,
    pub farthest: usize,
    pub expected: Vec<Expected>,
}

impl<'s> Cursor<'s> {
    pub fn new(text: &'s str) -> Self {
        Self {
            bytes: text.as_bytes(),
            position: 0,
            farthest: 0,
            expected: Vec::new(),
        }
    }

    pub fn text_from(&self, start: usize, end: usize) -> &'s str {
        // Lexemes only ever span ASCII bytes, so these are char boundaries.
        std::str::from_utf8(self.bytes.get(start..end).unwrap_or(&[])).unwrap_or("")
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn fail(&mut self, expected: Expected) {
        if self.position > self.farthest {
            self.farthest = self.position;
            self.expected.clear();
        }
        if self.position == self.farthest && !self.expected.contains(&expected) {
            self.expected.push(expected);
        }
    }

    /// The skipper: the joined text only holds single spaces.
    pub fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.position += 1;
        }
    }

    pub fn at_end(&mut self) -> bool {
        self.skip_spaces();
        if self.position >= self.bytes.len() {
            true
        } else {
            self.fail(Expected::End);
            false
        }
    }

    /// `str_p(word)` / `ch_p(c)`: a plain prefix match, no word boundary.
    pub fn literal(&mut self, word: &'static str) -> bool {
        self.skip_spaces();
        let end = self.position + word.len();
        if self.bytes.get(self.position..end) == Some(word.as_bytes()) {
            self.position = end;
            true
        } else {
            self.fail(Expected::Literal(word));
            false
        }
    }

    fn digits_from(&self, start: usize) -> usize {
        let mut end = start;
        while self.bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        end
    }

    /// `posint`: one or more digits. Returns the lexeme.
    pub fn unsigned_integer(&mut self) -> Option<&'s str> {
        self.skip_spaces();
        let end = self.digits_from(self.position);
        if end == self.position {
            self.fail(Expected::UnsignedInteger);
            return None;
        }
        let lexeme = self.text_from(self.position, end);
        self.position = end;
        Some(lexeme)
    }

    /// `negint`: '-' then digits.
    pub fn negative_integer(&mut self) -> Option<&'s str> {
        self.skip_spaces();
        if self.peek() != Some(b'-') {
            self.fail(Expected::NegativeInteger);
            return None;
        }
        let end = self.digits_from(self.position + 1);
        if end == self.position + 1 {
            self.fail(Expected::NegativeInteger);
            return None;
        }
        let lexeme = self.text_from(self.position, end);
        self.position = end;
        Some(lexeme)
    }

    /// `integer`: an optional '-' then digits.
    pub fn integer(&mut self) -> Option<&'s str> {
        self.skip_spaces();
        let digits_start = self.position + usize::from(self.peek() == Some(b'-'));
        let end = self.digits_from(digits_start);
        if end == digits_start {
            self.fail(Expected::Integer);
            return None;
        }
        let lexeme = self.text_from(self.position, end);
        self.position = end;
        Some(lexeme)
    }

    /// `name`: one or more of ASCII alphanumerics, '-', '_', '.'.
    pub fn name(&mut self) -> Option<&'s str> {
        self.skip_spaces();
        let mut end = self.position;
        while self
            .bytes
            .get(end)
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            end += 1;
        }
        if end == self.position {
            self.fail(Expected::Name);
            return None;
        }
        let lexeme = self.text_from(self.position, end);
        self.position = end;
        Some(lexeme)
    }

    /// Spirit's `real_p`: optional sign, digits with an optional '.' (leading or trailing dot
    /// allowed, at least one digit), optional exponent. Returns the lexeme.
    pub fn real(&mut self) -> Option<&'s str> {
        self.skip_spaces();
        let start = self.position;
        let mut at = start;
        if matches!(self.bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let integer_end = self.digits_from(at);
        let mut digits = integer_end - at;
        at = integer_end;
        if self.bytes.get(at) == Some(&b'.') {
            let fraction_end = self.digits_from(at + 1);
            let fraction_digits = fraction_end - (at + 1);
            if digits + fraction_digits > 0 {
                digits += fraction_digits;
                at = fraction_end;
            }
        }
        if digits == 0 {
            self.fail(Expected::Real);
            return None;
        }
        if matches!(self.bytes.get(at), Some(b'e' | b'E')) {
            let mut exponent = at + 1;
            if matches!(self.bytes.get(exponent), Some(b'+' | b'-')) {
                exponent += 1;
            }
            let exponent_end = self.digits_from(exponent);
            if exponent_end == exponent {
                // Spirit fails the whole real when the exponent has no digits.
                self.fail(Expected::Real);
                return None;
            }
            at = exponent_end;
        }
        let lexeme = self.text_from(start, at);
        self.position = at;
        Some(lexeme)
    }
}

/// `strtol(s, 0, 10)` then the implicit conversion to `int`: saturates at the `long` range,
/// then keeps the low 32 bits.
pub(crate) fn c_int(lexeme: &str) -> i32 {
    let (negative, digits) = match lexeme.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, lexeme.strip_prefix('+').unwrap_or(lexeme)),
    };
    let mut value: i128 = 0;
    for digit in digits.bytes().take_while(u8::is_ascii_digit) {
        value = (value * 10 + i128::from(digit - b'0')).min(i128::from(i64::MAX) + 1);
    }
    let signed = if negative { -value } else { value };
    let long = signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    long as i32
}

/// `strtof` on a `real_p` lexeme (Rust's parser rounds correctly, like glibc's).
pub(crate) fn c_float(lexeme: &str) -> f32 {
    lexeme.parse::<f32>().unwrap_or(0.0)
}

/// A float converted to `unsigned` as gcc compiles it on x86-64 (`cvttss2si` to 64 bits, keep
/// the low 32): negative values wrap, out-of-range and NaN give 0.
pub(crate) fn float_to_u32(value: f32) -> u32 {
    double_to_u32(f64::from(value))
}

/// The same for a double (`cvttsd2si`).
pub(crate) fn double_to_u32(value: f64) -> u32 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if value.is_nan() || !(-LIMIT..LIMIT).contains(&value) {
        return 0;
    }
    (value as i64) as u32
}

/// A weight as the compiler reads it: `(unsigned)(strtof(s) * (float)0x10000)`.
pub(crate) fn weight_16_16(lexeme: &str) -> u32 {
    float_to_u32(c_float(lexeme) * 65536.0_f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_joins_lines_and_maps_offsets_back() {
        let source = Source::new("# header\n\ndevice  0\tosd.0 # c\n   type 1 host\n");
        assert_eq!(source.text, "device 0 osd.0 type 1 host");
        assert_eq!(source.line_of(0), 3);
        assert_eq!(source.line_of(9), 3);
        assert_eq!(source.line_of(15), 4);
        assert_eq!(source.line_of(source.text.len()), 4);
    }

    #[test]
    fn c_conversions_match_the_c_library() {
        assert_eq!(c_int("42"), 42);
        assert_eq!(c_int("-7"), -7);
        assert_eq!(c_int("4294967295"), -1);
        assert_eq!(c_int("99999999999999999999999"), -1);
        assert_eq!(weight_16_16("1.0"), 0x10000);
        assert_eq!(weight_16_16("0.00001"), 0);
        assert_eq!(weight_16_16("-1"), 0xffff_0000);
        assert_eq!(weight_16_16("1e40"), 0);
        assert_eq!(weight_16_16("1.81940"), (1.8194_f32 * 65536.0) as u32);
    }

    #[test]
    fn real_lexemes_follow_spirit() {
        for (text, lexeme) in [
            ("1.5 x", Some("1.5")),
            (".5", Some(".5")),
            ("5.", Some("5.")),
            ("-2e3", Some("-2e3")),
            ("1e", None),
            (".", None),
            ("abc", None),
        ] {
            let mut cursor = Cursor::new(text);
            assert_eq!(cursor.real(), lexeme, "{text}");
        }
    }
}
