//! A hash table of short byte strings (the topic lexicon's words, phrases and stems), looked up
//! by a hash that the caller makes from the hashes of a word's prefixes: a word's, its first `n`
//! bytes', the word less an ending, the word less an ending plus a letter, and words joined by a
//! space all come from one pass over the word (`Prefixes`) or from the words' own hashes
//! (`join`), without building the string. The hash is polynomial (`h · P + byte`, mod 2^64), so
//! it is cheap to extend; keys are compared on a hash match, so a collision costs time only.

/// The hash's multiplier (odd: FNV's 64-bit prime).
const P: u64 = 0x100000001b3;

/// The hash of `bytes`.
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |h, &b| extend(h, b))
}

/// The hash of the bytes hashed to `h` followed by `b`.
#[inline]
pub fn extend(h: u64, b: u8) -> u64 {
    h.wrapping_mul(P).wrapping_add(b as u64)
}

/// The hash of `a`, a space, then `b` (of `b_len` bytes), from the hashes of `a` and `b`.
pub fn join(a: u64, b: u64, b_len: usize) -> u64 {
    extend(a, b' ').wrapping_mul(P.wrapping_pow(b_len as u32)).wrapping_add(b)
}

/// The hashes of every prefix of a word (its first 64 bytes; longer prefixes are hashed when
/// asked for).
pub struct Prefixes<'a> {
    word: &'a [u8],
    pre: [u64; 65],
}

impl<'a> Prefixes<'a> {
    pub fn new(word: &'a [u8]) -> Prefixes<'a> {
        let mut pre = [0u64; 65];
        for (i, &b) in word.iter().take(64).enumerate() {
            pre[i + 1] = extend(pre[i], b);
        }
        Prefixes { word, pre }
    }

    /// The hash of the word's first `n` bytes.
    #[inline]
    pub fn get(&self, n: usize) -> u64 {
        if n <= 64 {
            self.pre[n]
        } else {
            hash(&self.word[..n])
        }
    }
}

/// Strings → values, open addressing (linear probing, at most half full).
#[derive(Clone)]
pub struct WordTable<V> {
    /// 1 + the index of an entry in `entries`, or 0 for an empty slot.
    slots: Box<[u32]>,
    entries: Vec<(u64, Box<[u8]>, V)>,
}

impl<V> Default for WordTable<V> {
    fn default() -> Self {
        WordTable { slots: vec![0; 16].into_boxed_slice(), entries: Vec::new() }
    }
}

/// The slot a hash starts its probe at (its bits mixed, then cut to the table's size).
#[inline]
fn start(h: u64, mask: usize) -> usize {
    let h = (h ^ (h >> 31)).wrapping_mul(0xbf58476d1ce4e5b9);
    (h ^ (h >> 29)) as usize & mask
}

impl<V> WordTable<V> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in the order they were inserted.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.entries.iter().map(|(_, k, v)| (&**k, v))
    }

    /// The value of the key hashed to `h` for which `is_key` holds.
    #[inline]
    pub fn get_by(&self, h: u64, is_key: impl Fn(&[u8]) -> bool) -> Option<&V> {
        let mask = self.slots.len() - 1;
        let mut s = start(h, mask);
        loop {
            let e = self.slots[s];
            if e == 0 {
                return None;
            }
            let (eh, key, v) = &self.entries[e as usize - 1];
            if *eh == h && is_key(key) {
                return Some(v);
            }
            s = (s + 1) & mask;
        }
    }

    /// The value of `key`, whose hash is `h`.
    #[inline]
    pub fn get(&self, h: u64, key: &[u8]) -> Option<&V> {
        self.get_by(h, |k| k == key)
    }

    /// The value of `key`, inserted as `V::default()` when it is not there.
    pub fn entry(&mut self, key: &[u8]) -> &mut V
    where
        V: Default,
    {
        let h = hash(key);
        let mask = self.slots.len() - 1;
        let mut s = start(h, mask);
        loop {
            match self.slots[s] {
                0 => break,
                e if self.entries[e as usize - 1].0 == h && &*self.entries[e as usize - 1].1 == key => {
                    return &mut self.entries[e as usize - 1].2;
                }
                _ => s = (s + 1) & mask,
            }
        }
        self.entries.push((h, key.into(), V::default()));
        if self.entries.len() * 2 > self.slots.len() {
            self.rebuild(self.slots.len() * 2);
        } else {
            self.slots[s] = self.entries.len() as u32;
        }
        &mut self.entries.last_mut().expect("just pushed").2
    }

    fn rebuild(&mut self, size: usize) {
        self.slots = vec![0; size].into_boxed_slice();
        let mask = size - 1;
        for (i, (h, _, _)) in self.entries.iter().enumerate() {
            let mut s = start(*h, mask);
            while self.slots[s] != 0 {
                s = (s + 1) & mask;
            }
            self.slots[s] = i as u32 + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_from_parts_are_the_strings_hashes() {
        let w = b"sertralina";
        let p = Prefixes::new(w);
        for n in 0..=w.len() {
            assert_eq!(p.get(n), hash(&w[..n]));
        }
        assert_eq!(extend(p.get(9), b'e'), hash(b"sertraline"));
        assert_eq!(join(hash(b"blood"), hash(b"test"), 4), hash(b"blood test"));
        let long = [b'x'; 100];
        assert_eq!(Prefixes::new(&long).get(80), hash(&long[..80]));
    }

    #[test]
    fn finds_what_was_inserted_and_nothing_else() {
        let mut t: WordTable<usize> = WordTable::default();
        let words: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
        for (i, w) in words.iter().enumerate() {
            *t.entry(w.as_bytes()) += i + 1;
        }
        *t.entry(b"w7") += 100;
        assert_eq!(t.len(), 5000);
        for (i, w) in words.iter().enumerate() {
            let want = if i == 7 { 108 } else { i + 1 };
            assert_eq!(t.get(hash(w.as_bytes()), w.as_bytes()), Some(&want), "{w}");
        }
        assert_eq!(t.get(hash(b"w5000"), b"w5000"), None);
        assert_eq!(t.get(hash(b""), b""), None);
        // A hash that matches with another key is not that key.
        assert_eq!(t.get(hash(b"w1"), b"w2"), None);
        assert_eq!(t.iter().map(|(k, _)| k).nth(3), Some(&b"w3"[..]));
    }
}
