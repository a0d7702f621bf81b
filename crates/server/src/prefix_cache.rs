//! Prefix cache of sequence states.
//!
//! The model is hybrid: 30 of its 40 layers carry a fixed-size recurrent state that cannot be
//! cut back to an earlier position, so a KV-style "keep the matching blocks" cache does not
//! work. Instead we keep whole snapshots of the sequence state at chosen token counts (the end of
//! each prompt, the end of each reply, message boundaries and regular intervals inside long
//! prompts); a new prompt resumes from the longest snapshot whose tokens are a prefix of it and
//! prefills only the rest. A snapshot at the end of a prompt or a reply also keeps the logits
//! that followed its last token, so a prompt that is entirely cached needs no prefill at all; one
//! inside a prompt keeps none (its piece was prefilled without them) and serves only longer prompts.
//!
//! Each snapshot belongs to the LoRA adapter its sequence ran with (0: none), and serves only
//! prompts of that adapter.
//!
//! Bounded by an entry count and a byte budget (states + logits + token lists); the least
//! recently used snapshot goes first.

pub struct PrefixCache<S> {
    entries: Vec<Entry<S>>,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    clock: u64,
}

pub struct Entry<S> {
    /// `LoraAdapter::id` of the sequence's adapter; 0 without one.
    pub adapter: u64,
    pub tokens: Vec<u32>,
    pub state: S,
    /// Logits after the last token (they predict the next one).
    pub logits: Vec<f32>,
    bytes: usize,
    last_used: u64,
}

impl<S> PrefixCache<S> {
    /// `max_entries` 0 or `max_bytes` 0 disables the cache.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        PrefixCache { entries: Vec::new(), max_entries, max_bytes, bytes: 0, clock: 0 }
    }

    /// Whether it keeps anything at all.
    pub fn enabled(&self) -> bool {
        self.max_entries > 0 && self.max_bytes > 0
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The snapshot of `adapter` with the most tokens that are a prefix of `prompt` (all of it
    /// only if the snapshot kept its logits); marks it as used.
    pub fn longest_prefix(&mut self, adapter: u64, prompt: &[u32]) -> Option<&Entry<S>> {
        let best = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.adapter == adapter && prompt.starts_with(&e.tokens))
            .filter(|(_, e)| e.tokens.len() < prompt.len() || !e.logits.is_empty())
            .max_by_key(|(_, e)| e.tokens.len())
            .map(|(i, _)| i)?;
        self.clock += 1;
        self.entries[best].last_used = self.clock;
        Some(&self.entries[best])
    }

    pub fn contains(&self, adapter: u64, tokens: &[u32]) -> bool {
        self.entries.iter().any(|e| e.adapter == adapter && e.tokens == tokens)
    }

    /// Keeps a snapshot of the sequence `tokens` run with `adapter`; `state_bytes` is what the
    /// state holds.
    /// Replaces a snapshot of the same tokens; evicts least recently used ones to fit. A snapshot
    /// larger than the whole budget is not kept.
    pub fn insert(&mut self, adapter: u64, tokens: Vec<u32>, state: S, logits: Vec<f32>, state_bytes: usize) {
        let bytes = state_bytes + 4 * (logits.len() + tokens.len());
        if tokens.is_empty() || self.max_entries == 0 || bytes > self.max_bytes {
            return;
        }
        if let Some(i) = self.entries.iter().position(|e| e.adapter == adapter && e.tokens == tokens) {
            self.remove(i);
        }
        while !self.entries.is_empty()
            && (self.entries.len() >= self.max_entries || self.bytes + bytes > self.max_bytes)
        {
            let lru = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_used).unwrap_or(0);
            self.remove(lru);
        }
        self.clock += 1;
        self.bytes += bytes;
        self.entries.push(Entry { adapter, tokens, state, logits, bytes, last_used: self.clock });
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    fn remove(&mut self, i: usize) {
        let e = self.entries.swap_remove(i);
        self.bytes -= e.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::PrefixCache;

    #[test]
    fn longest_prefix_wins_and_a_full_match_needs_logits() {
        let mut c = PrefixCache::new(10, 1 << 20);
        c.insert(0, vec![1, 2], "a", vec![], 0);
        c.insert(0, vec![1, 2, 3, 4], "b", vec![0.5], 0);
        c.insert(0, vec![1, 9], "c", vec![], 0);
        assert_eq!(c.longest_prefix(0, &[1, 2, 3, 4, 5]).unwrap().state, "b");
        assert_eq!(c.longest_prefix(0, &[1, 2, 3, 4]).unwrap().state, "b");
        assert_eq!(c.longest_prefix(0, &[1, 2, 3]).unwrap().state, "a");
        assert!(c.longest_prefix(0, &[2, 1]).is_none());
        // a snapshot without logits (inside a prompt) cannot answer its own prompt
        assert!(c.longest_prefix(0, &[1, 9]).is_none());
        assert_eq!(c.longest_prefix(0, &[1, 2]).map(|e| e.state), None);
        assert_eq!(c.longest_prefix(0, &[1, 9, 7]).unwrap().state, "c");
    }

    #[test]
    fn evicts_least_recently_used_by_count_and_bytes() {
        let mut c = PrefixCache::new(2, 1 << 20);
        c.insert(0, vec![1], 1, vec![], 0);
        c.insert(0, vec![2], 2, vec![], 0);
        c.longest_prefix(0, &[1, 5]); // 1 is now more recent than 2
        c.insert(0, vec![3], 3, vec![], 0);
        assert!(c.contains(0, &[1]) && c.contains(0, &[3]) && !c.contains(0, &[2]));

        // Each entry: 100 state bytes + 4 per token.
        let mut c = PrefixCache::new(100, 250);
        c.insert(0, vec![1], 1, vec![], 100);
        c.insert(0, vec![2], 2, vec![], 100);
        assert_eq!(c.bytes(), 208);
        c.insert(0, vec![3], 3, vec![], 100);
        assert_eq!((c.len(), c.bytes()), (2, 208));
        assert!(!c.contains(0, &[1]));
        c.insert(0, vec![4], 4, vec![], 1000); // larger than the budget: not kept, nothing evicted
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn reinserting_the_same_tokens_replaces() {
        let mut c = PrefixCache::new(4, 1 << 20);
        c.insert(0, vec![1, 2], "old", vec![0.5], 8);
        c.insert(0, vec![1, 2], "new", vec![0.5], 8);
        assert_eq!((c.len(), c.bytes()), (1, 8 + 4 + 8));
        assert_eq!(c.longest_prefix(0, &[1, 2]).unwrap().state, "new");
        let mut off = PrefixCache::new(0, 0);
        off.insert(0, vec![1], (), vec![], 0);
        assert!(off.is_empty());
    }

    #[test]
    fn snapshots_serve_only_their_adapter() {
        let mut c = PrefixCache::new(10, 1 << 20);
        c.insert(0, vec![1, 2], "base", vec![0.5], 0);
        c.insert(7, vec![1, 2, 3], "lora", vec![0.5], 0);
        assert_eq!(c.longest_prefix(0, &[1, 2, 3, 4]).unwrap().state, "base");
        assert_eq!(c.longest_prefix(7, &[1, 2, 3, 4]).unwrap().state, "lora");
        assert!(c.longest_prefix(8, &[1, 2, 3, 4]).is_none());
        assert!(c.contains(7, &[1, 2, 3]) && !c.contains(0, &[1, 2, 3]));
        c.insert(7, vec![1, 2], "lora short", vec![0.5], 0); // beside the base one, not replacing it
        assert_eq!(c.len(), 3);
    }
}
