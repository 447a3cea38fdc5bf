//! Phonemes to visemes, and visemes to target mouth shapes.
//!
//! `viseme_for_phoneme` accepts both espeak-ng phoneme mnemonics (`aI`, `@`, `i:`, `tS`, `T`,
//! `_:`; as printed by `espeak-ng -x`) and the IPA that espeak-ng and Piper print (`aɪ`, `ə`,
//! `iː`, `tʃ`, `θ`; `espeak-ng --ipa`). Stress (`ˈ ˌ ' , %`), length (`ː ˑ :`), combining
//! diacritics and tie bars are ignored; a diphthong or affricate takes the viseme of its first
//! segment (`aI` → Open, `oʊ` → Rounded, `tʃ` → Narrow). Pauses, word gaps, punctuation and
//! Piper's pad/BOS/EOS symbols (`_ ^ $`) are `Silence` (so is a lone `?`: Piper punctuation;
//! espeak-ng's glottal stop looks the same and is nearly closed anyway); anything unknown is
//! `Narrow`, the least conspicuous speaking shape. Matching is case-sensitive because espeak-ng
//! is (`E` ɛ vs `e`, `O` ɔ vs `o`, `S` ʃ vs `s`, `T` θ vs `t`).
//!
//! `stress_of` and `phrase_mark_of` read what the same symbols say about the voice: a stress mark
//! before a segment (`ˈ` or espeak-ng's `'`: primary, `ˌ` or `,`: secondary) and the punctuation
//! Piper's phoneme stream carries (`?` a question, `.` `!` `,` `;` a phrase end; a `,` or `;`
//! before a segment is espeak-ng's secondary stress or palatal mark instead, and `:` is length).
//!
//! It does not time or blend anything: that is `track`.

use face_render::MouthShape;

/// A class of mouth shapes that look alike (several phonemes share one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Viseme {
    /// Pause: lips closed and relaxed.
    Silence,
    /// aa, a, ɑ, æ, aI, aU: jaw well open.
    Open,
    /// e, E, ə, ʌ, @: half open, neutral lips.
    Mid,
    /// i, iː, ɪ, ee: spread lips, jaw nearly closed.
    Wide,
    /// u, uː, ʊ, oʊ, w, O: rounded, protruded lips.
    Rounded,
    /// p, b, m: lips pressed together.
    Closed,
    /// f, v: lower lip against the upper teeth.
    LabioDental,
    /// θ, ð: tongue between the teeth.
    Dental,
    /// s z ʃ ʒ tʃ dʒ t d n l k g ŋ r h j: teeth nearly together, lips relaxed.
    Narrow,
}

impl Viseme {
    /// Every viseme, in declaration order.
    pub const ALL: [Viseme; 9] = [
        Viseme::Silence,
        Viseme::Open,
        Viseme::Mid,
        Viseme::Wide,
        Viseme::Rounded,
        Viseme::Closed,
        Viseme::LabioDental,
        Viseme::Dental,
        Viseme::Narrow,
    ];
}

/// Where a phrase ends, from a phoneme's punctuation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PhraseMark {
    #[default]
    None,
    /// `.` `!` `,` `;`: the phrase (or sentence) ends.
    End,
    /// `?`: a question ends.
    Question,
}

/// Stress of a phoneme symbol: 2 primary (`ˈ`, espeak-ng `'`), 1 secondary (`ˌ`, espeak-ng `,`),
/// 0 none; only marks before a segment count (a lone `,` is punctuation).
pub fn stress_of(p: &str) -> u8 {
    let p = p.trim();
    let has_segment = p.chars().any(|c| !is_mark(c) && !is_pause_char(c));
    if !has_segment {
        return 0;
    }
    let lead = p.chars().take_while(|&c| is_mark(c) || is_pause_char(c));
    let mut stress = 0;
    for c in lead {
        stress = stress.max(match c {
            'ˈ' | '\'' => 2,
            'ˌ' | ',' => 1,
            _ => 0,
        });
    }
    stress
}

/// The phrase mark a phoneme symbol carries (see the module comment).
pub fn phrase_mark_of(p: &str) -> PhraseMark {
    let p = p.trim();
    if p.contains('?') {
        return PhraseMark::Question;
    }
    let segment_at = p.char_indices().find(|&(_, c)| !is_mark(c) && !is_pause_char(c)).map(|(i, _)| i);
    let ends = |s: &str, all: bool| s.chars().any(|c| matches!(c, '.' | '!') || (all && matches!(c, ',' | ';')));
    match segment_at {
        // Punctuation after a segment ("ŋ."), never the marks before it.
        Some(i) if ends(&p[i..], true) => PhraseMark::End,
        Some(_) => PhraseMark::None,
        None if ends(p, true) => PhraseMark::End,
        None => PhraseMark::None,
    }
}

/// Target mouth shape of a viseme, reached when the viseme is held long enough.
///
/// | viseme      | open | wide  | press | tongue | why |
/// |-------------|------|-------|-------|--------|-----|
/// | Silence     | 0    | 0     | 0     | 0      | relaxed, closed lips (= `MouthShape::CLOSED`) |
/// | Open        | 0.80 | 0.10  | 0     | 0.1    | the widest speech opening; full 1.0 is reserved for shouting; tongue low |
/// | Mid         | 0.50 | 0.15  | 0     | 0.3    | schwa-like, half open |
/// | Wide        | 0.28 | 0.70  | 0     | 0.5    | spread lips, jaw nearly closed; tongue high and forward (ee) |
/// | Rounded     | 0.35 | -0.80 | 0     | 0.2    | small round opening; tongue back |
/// | Closed      | 0    | 0     | 1     | 0.3    | bilabial closure: must read as pressed |
/// | LabioDental | 0.10 | 0.15  | 0.35  | 0.3    | lower lip tucked under the teeth: nearly closed, partly pressed |
/// | Dental      | 0.20 | 0.25  | 0     | 1.0    | a slit for the tongue tip, raised to the teeth |
/// | Narrow      | 0.18 | 0.30  | 0     | 0.6    | teeth nearly together, slightly spread; tongue near the ridge (s, t, n) |
pub fn target_shape(v: Viseme) -> MouthShape {
    let (open, wide, press, tongue) = match v {
        Viseme::Silence => (0.0, 0.0, 0.0, 0.0),
        Viseme::Open => (0.80, 0.10, 0.0, 0.1),
        Viseme::Mid => (0.50, 0.15, 0.0, 0.3),
        Viseme::Wide => (0.28, 0.70, 0.0, 0.5),
        Viseme::Rounded => (0.35, -0.80, 0.0, 0.2),
        Viseme::Closed => (0.0, 0.0, 1.0, 0.3),
        Viseme::LabioDental => (0.10, 0.15, 0.35, 0.3),
        Viseme::Dental => (0.20, 0.25, 0.0, 1.0),
        Viseme::Narrow => (0.18, 0.30, 0.0, 0.6),
    };
    MouthShape { open, wide, press, tongue }
}

/// Characters that alone (or in any combination) denote a pause: espeak-ng `_`, `_:`, `_!`, `||`;
/// Piper's pad `_`, BOS `^`, EOS `$`; word gaps and punctuation.
fn is_pause_char(c: char) -> bool {
    matches!(
        c,
        '_' | '^' | '$' | '|' | '‖' | '.' | ',' | ';' | ':' | '!' | '?' | '¡' | '¿' | '-' | '—' | '–'
            | '…' | '"' | '(' | ')' | '«' | '»'
    ) || c.is_whitespace()
}

/// Marks that modify a phoneme without changing its mouth shape: stress, length, syllabicity,
/// espeak-ng's `#` variant marker (its digit variants such as `I2` follow the first segment and
/// are never looked at; a leading `0` or `3` is a vowel), and IPA combining diacritics (U+0300..U+036F, which include the
/// tie bars) and modifier letters for aspiration, palatalisation and the like.
fn is_mark(c: char) -> bool {
    matches!(c, 'ˈ' | 'ˌ' | '\'' | ',' | '%' | '=' | 'ː' | 'ˑ' | ':' | '#' | ';' | '‿' | 'ʰ' | 'ʲ' | 'ʷ' | 'ˠ' | 'ˤ')
        || ('\u{0300}'..='\u{036F}').contains(&c)
}

/// Viseme of the first segment of a phoneme symbol (after marks are stripped).
fn viseme_of_char(c: char) -> Viseme {
    match c {
        // Open vowels. espeak: a (trap), A (ɑ), & (æ in some voices), 0 (ɒ); IPA a ɑ æ ɐ ɒ ä ɶ.
        'a' | 'A' | '&' | '0' | 'ɑ' | 'æ' | 'ɐ' | 'ɒ' | 'ä' | 'ɶ' => Viseme::Open,
        // Mid vowels. espeak: e, E (ɛ), @ (ə), 3 (ɜ), V (ʌ); IPA e ɛ ə ʌ ɜ ɚ ɝ ɘ ɤ.
        'e' | 'E' | '@' | '3' | 'V' | 'ɛ' | 'ə' | 'ʌ' | 'ɜ' | 'ɚ' | 'ɝ' | 'ɘ' | 'ɤ' => Viseme::Mid,
        // Close front / unrounded vowels. espeak: i, I (ɪ); IPA i ɪ ɨ ɯ.
        'i' | 'I' | 'ɪ' | 'ɨ' | 'ɯ' | 'ᵻ' => Viseme::Wide,
        // Rounded vowels and w. espeak: u, U (ʊ), o, O (ɔ), w, y (ü), Y (ø), W (œ); IPA.
        'u' | 'U' | 'o' | 'O' | 'w' | 'y' | 'Y' | 'W' | 'ʊ' | 'ɔ' | 'ʉ' | 'ɵ' | 'ø' | 'œ' | 'ʏ'
        | 'ʍ' | 'ɥ' => Viseme::Rounded,
        // Bilabials.
        'p' | 'b' | 'm' | 'ɓ' | 'ʙ' | 'ɸ' | 'β' => Viseme::Closed,
        // Labiodentals.
        'f' | 'v' | 'ɱ' | 'ʋ' => Viseme::LabioDental,
        // Dentals. espeak: T (θ), D (ð).
        'T' | 'D' | 'θ' | 'ð' => Viseme::Dental,
        _ => Viseme::Narrow,
    }
}

/// Viseme of one phoneme symbol, espeak-ng mnemonic or IPA. See the module comment.
pub fn viseme_for_phoneme(p: &str) -> Viseme {
    let p = p.trim();
    if p.chars().all(is_pause_char) {
        return Viseme::Silence; // also the empty string
    }
    let core: String = p.chars().filter(|&c| !is_mark(c)).collect();
    if core.chars().all(is_pause_char) {
        return Viseme::Silence; // a pause with a stress mark, or marks alone ("ˈ")
    }
    // Whole-symbol spellings that the first-character rule would get wrong.
    match core.as_str() {
        "ee" => return Viseme::Wide,
        "sil" | "sp" | "pau" | "SIL" => return Viseme::Silence,
        _ => {}
    }
    core.chars().next().map_or(Viseme::Silence, viseme_of_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_map_to(symbols: &[&str], v: Viseme) {
        for s in symbols {
            assert_eq!(viseme_for_phoneme(s), v, "symbol {s:?}");
        }
    }

    #[test]
    fn espeak_mnemonics_map_to_every_class() {
        all_map_to(&["_", "_:", "_!", "||", " ", ""], Viseme::Silence);
        all_map_to(&["a", "aa", "A:", "aI", "aU", "a#", "'a", ",aI", "0"], Viseme::Open);
        all_map_to(&["e", "E", "@", "3:", "V", "eI", "@U", "e@", "'E", "@L", "@2"], Viseme::Mid);
        all_map_to(&["i", "i:", "I", "i@", "I2", "'i:", "ee"], Viseme::Wide);
        all_map_to(&["u", "u:", "U", "oU", "O", "O:", "OI", "w", "U@", "'u:"], Viseme::Rounded);
        all_map_to(&["p", "b", "m"], Viseme::Closed);
        all_map_to(&["f", "v"], Viseme::LabioDental);
        all_map_to(&["T", "D"], Viseme::Dental);
        all_map_to(
            &["s", "z", "S", "Z", "tS", "dZ", "t", "d", "n", "l", "k", "g", "N", "r", "r-", "h", "j", "x"],
            Viseme::Narrow,
        );
    }

    #[test]
    fn ipa_symbols_map_to_every_class() {
        all_map_to(&["_", "^", "$", ".", ",", "ˈ_"], Viseme::Silence);
        all_map_to(&["ɑ", "ɑː", "æ", "a", "aɪ", "aʊ", "ˈaɪ", "ɐ", "ɒ"], Viseme::Open);
        all_map_to(&["e", "ɛ", "ə", "ʌ", "ɜː", "ɚ", "eɪ", "əʊ", "ˌə", "ˈɛ"], Viseme::Mid);
        all_map_to(&["i", "iː", "ɪ", "ˈiː", "ɪə"], Viseme::Wide);
        all_map_to(&["u", "uː", "ʊ", "oʊ", "ɔ", "ɔː", "ɔɪ", "w", "ˈuː", "ʊə"], Viseme::Rounded);
        all_map_to(&["p", "b", "m", "pʰ", "m̩"], Viseme::Closed);
        all_map_to(&["f", "v", "ɱ"], Viseme::LabioDental);
        all_map_to(&["θ", "ð"], Viseme::Dental);
        all_map_to(
            &["s", "z", "ʃ", "ʒ", "tʃ", "t͡ʃ", "dʒ", "d͡ʒ", "t", "tʰ", "d", "n", "l", "k", "ɡ", "ŋ", "ɹ", "r", "ɾ", "h", "j", "ʔ"],
            Viseme::Narrow,
        );
    }

    #[test]
    fn unknown_symbols_are_narrow() {
        all_map_to(&["q", "ʕ", "★", "xyz"], Viseme::Narrow);
        // A lone mark has no segment: treated as a pause rather than a shape.
        all_map_to(&["ˈ", "ː"], Viseme::Silence);
    }

    #[test]
    fn stress_and_phrase_marks_are_read_and_the_viseme_ignores_them() {
        for (p, stress) in [("ˈeɪ", 2), ("ˌaʊ", 1), ("'a", 2), (",aI", 1), ("eɪ", 0), ("ˈ", 0), (",", 0), ("_", 0), ("ŋ?", 0)] {
            assert_eq!(stress_of(p), stress, "{p:?}");
        }
        for (p, mark) in [
            ("?", PhraseMark::Question),
            ("_?", PhraseMark::Question),
            ("ŋ?", PhraseMark::Question),
            (".", PhraseMark::End),
            ("!", PhraseMark::End),
            (",", PhraseMark::End),
            (";", PhraseMark::End),
            ("ɪŋ.", PhraseMark::End),
            (",aI", PhraseMark::None),
            ("_:", PhraseMark::None),
            ("_", PhraseMark::None),
            ("ˈeɪ", PhraseMark::None),
            ("i:", PhraseMark::None),
        ] {
            assert_eq!(phrase_mark_of(p), mark, "{p:?}");
        }
        assert_eq!(viseme_for_phoneme("ˈeɪ"), viseme_for_phoneme("eɪ"));
        assert_eq!(viseme_for_phoneme("?"), Viseme::Silence);
    }

    #[test]
    fn target_shapes_follow_the_table() {
        assert_eq!(target_shape(Viseme::Silence), MouthShape::CLOSED);
        assert_eq!(target_shape(Viseme::Open), MouthShape { open: 0.8, wide: 0.1, press: 0.0, tongue: 0.1 });
        assert_eq!(target_shape(Viseme::Rounded), MouthShape { open: 0.35, wide: -0.8, press: 0.0, tongue: 0.2 });
        assert_eq!(target_shape(Viseme::Closed).press, 1.0);
        assert_eq!(target_shape(Viseme::Closed).open, 0.0);
        for v in Viseme::ALL {
            let s = target_shape(v);
            assert!((0.0..=1.0).contains(&s.open) && (-1.0..=1.0).contains(&s.wide) && (0.0..=1.0).contains(&s.press));
        }
        // Relative order that makes the shapes readable: Open is the widest opening, Wide the most
        // spread, Rounded the only rounded one, only the lip closures press.
        let open = |v| target_shape(v).open;
        for v in Viseme::ALL {
            assert!(open(Viseme::Open) >= open(v));
            assert!(target_shape(Viseme::Wide).wide >= target_shape(v).wide);
            if v != Viseme::Rounded {
                assert!(target_shape(v).wide >= 0.0);
            }
            if !matches!(v, Viseme::Closed | Viseme::LabioDental) {
                assert_eq!(target_shape(v).press, 0.0);
            }
        }
        assert!(open(Viseme::Mid) > open(Viseme::Rounded) && open(Viseme::Rounded) > open(Viseme::Wide));
    }
}
