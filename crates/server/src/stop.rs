//! Stop strings over streamed text. Text that could be the start of a stop string is held back
//! until the next piece decides it, so a stop string split across tokens is still caught and
//! never reaches the client, not even in part.

pub struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not yet released: a possible beginning of a stop string.
    pending: String,
}

impl StopMatcher {
    /// Empty strings are ignored (they would match everywhere).
    pub fn new(stops: Vec<String>) -> Self {
        let stops = stops.into_iter().filter(|s| !s.is_empty()).collect();
        StopMatcher { stops, pending: String::new() }
    }

    /// Adds `text`; returns the text that is now safe to release and whether a stop string
    /// matched (then the released text ends right before the earliest match).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        self.pending.push_str(text);
        let earliest = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min();
        if let Some(at) = earliest {
            let out = self.pending[..at].to_string();
            self.pending.clear();
            return (out, true);
        }
        let hold = self.stops.iter().map(|s| partial_suffix(&self.pending, s)).max().unwrap_or(0);
        let out = self.pending[..self.pending.len() - hold].to_string();
        self.pending.drain(..self.pending.len() - hold);
        (out, false)
    }

    /// The held-back text, at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`.
fn partial_suffix(text: &str, stop: &str) -> usize {
    stop.char_indices().map(|(i, _)| i).skip(1).filter(|&len| text.ends_with(&stop[..len])).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::StopMatcher;

    /// Feeds `pieces`; returns (released text, matched).
    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let (text, hit) = m.push(p);
            out += &text;
            if hit {
                return (out, true);
            }
        }
        out += &m.finish();
        (out, false)
    }

    #[test]
    fn matches_across_pieces_and_cuts_before_the_stop() {
        assert_eq!(run(&["END"], &["abc E", "N", "Dxyz"]), ("abc ".into(), true));
        assert_eq!(run(&["\n\n"], &["a\n", "\nb"]), ("a".into(), true));
        assert_eq!(run(&["x", "bc"], &["abcx"]), ("a".into(), true));
    }

    #[test]
    fn a_false_start_is_released() {
        assert_eq!(run(&["END"], &["E", "N", "d"]), ("ENd".into(), false));
        assert_eq!(run(&["END"], &["abc", "EN"]), ("abcEN".into(), false));
        assert_eq!(run(&[""], &["abc"]), ("abc".into(), false));
    }

    #[test]
    fn every_split_of_the_text_gives_the_same_answer() {
        let text = "héllo wörld STOP here";
        for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            assert_eq!(run(&["STOP"], &[&text[..cut], &text[cut..]]), ("héllo wörld ".into(), true), "cut {cut}");
            assert_eq!(run(&["öx"], &[&text[..cut], &text[cut..]]), (text.into(), false), "cut {cut}");
        }
    }
}
