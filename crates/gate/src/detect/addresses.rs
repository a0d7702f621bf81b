//! Street addresses.

use super::{Detector, Keywords};
use crate::scan::{before, ceil, floor, word_char};
use crate::EntityType;

impl Detector {
    #[inline(never)]
    pub(super) fn addresses(
        &self,
        text: &str,
        _lower: &str,
        kw: &Keywords,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let window = |from: usize, n: usize| &text[from..ceil(text, from + n)];
        // After an address cue: a number and words, or words and a number, then a city.
        for m in &kw.address_cue {
            if let Some(x) = self.cued_address.find(window(m.end(), 120)) {
                let lead = x.as_str().len()
                    - x.as_str().trim_start_matches(|c: char| !c.is_alphanumeric() || c.is_lowercase()).len();
                push(m.end() + lead, m.end() + x.end(), EntityType::Address);
            }
        }
        let mut streets: Vec<(usize, usize)> = Vec::new();
        for at in street_starts(text, kw) {
            if word_char(before(text, at)) || streets.last().is_some_and(|l| at < l.1) {
                continue;
            }
            if let Some(x) = self.street_en.find(window(at, 120)) {
                streets.push((at, at + x.end()));
            }
        }
        for m in &kw.street_eu {
            let Some(x) = self.street_eu.find(window(m.end(), 100)) else { continue };
            let mut start = m.start();
            let mut end = m.end() + x.end();
            let has_number = x.as_str().bytes().any(|b| b.is_ascii_digit());
            let lead = self.number_before.find(&text[floor(text, start.saturating_sub(10))..start]);
            if let Some(l) = lead {
                start -= l.as_str().len();
            }
            if !has_number && lead.is_none() {
                // "rue" or "via" in prose is no address: a number must come with it.
                let rest = &text[end..];
                let t = rest.trim_start_matches([',', ' ']);
                let n = t.bytes().take_while(|b| b.is_ascii_digit()).count();
                if n == 0 {
                    continue;
                }
                end += rest.len() - t.len() + n;
            }
            streets.push((start, end));
        }
        for m in &kw.street_de {
            // Back to the start of the word that ends in the suffix ("Aurelia-Rogge-Platz").
            let head = &text[..m.start()];
            let word =
                head.chars().rev().take_while(|c| c.is_alphabetic() || *c == '-').map(char::len_utf8).sum::<usize>();
            let start = m.start() - word;
            if word < 2 || !text[start..].starts_with(|c: char| c.is_uppercase()) {
                continue;
            }
            streets.push((start, m.end()));
        }
        if streets.is_empty() {
            return;
        }
        streets.sort_by_key(|p| (p.0, std::cmp::Reverse(p.1)));
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for p in streets {
            match merged.last_mut() {
                Some(last) if p.0 <= last.1 => last.1 = last.1.max(p.1),
                _ => merged.push(p),
            }
        }
        for (s, mut e) in merged {
            // A unit after the street: "Apt. 388", "Suite 5", "Flat 2", "Piano 8", "Puerta 2".
            let rest = &text[e..];
            let t = rest.trim_start_matches([',', ' ']);
            for unit in
                ["Apt.", "Apt", "Suite", "Ste.", "Unit", "Flat", "Floor", "Piano", "Puerta", "Piso", "Bus", "bte", "#"]
            {
                if let Some(after_unit) = t.strip_prefix(unit) {
                    let n = after_unit.trim_start();
                    let k = n.bytes().take_while(|b| b.is_ascii_alphanumeric()).count();
                    if k > 0 && k <= 6 && (n.as_bytes()[0].is_ascii_digit() || k <= 2) {
                        e += rest.len() - n.len() + k;
                    }
                    break;
                }
            }
            // Then the city and postal code.
            if let Some(x) = self.postal_tail.find(window(e, 90)) {
                let tail = x.as_str();
                if tail.bytes().any(|b| b.is_ascii_digit()) && !tail.contains("\n\n") {
                    e += x.end();
                }
            }
            push(s, e, EntityType::Address);
        }
    }
}

pub(super) const STREET_SUFFIXES: &str = "Street|St|Avenue|Ave|Av|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Ter|Circle|Cir|Parkway|Pkwy|Highway|Hwy|Square|Sq|Trail|Trl|Crescent|Cres|Close|Grove|Gardens|Gdns|Row|Walk|Mews|Hill|Rise|View|Park|Green|Alley|Bypass|Causeway|Center|Centre|Corner|Cove|Creek|Crossing|Dale|Dam|Divide|Estate|Estates|Expressway|Extension|Falls|Ferry|Field|Fields|Flat|Flats|Ford|Forest|Forge|Forks|Fort|Freeway|Gateway|Glen|Harbor|Harbour|Haven|Heights|Hills|Hollow|Island|Islands|Isle|Junction|Key|Keys|Knoll|Knolls|Lake|Lakes|Landing|Light|Lights|Loaf|Lock|Locks|Lodge|Loop|Mall|Manor|Manors|Meadow|Meadows|Mill|Mills|Mission|Motorway|Mount|Mountain|Mountains|Neck|Orchard|Oval|Overpass|Pass|Path|Pike|Pine|Pines|Plain|Plains|Plaza|Point|Points|Port|Ports|Prairie|Radial|Ramp|Ranch|Rapid|Rapids|Rest|Ridge|Ridges|River|Route|Run|Shoal|Shoals|Shore|Shores|Skyway|Spring|Springs|Spur|Squares|Station|Stravenue|Stream|Streets|Summit|Throughway|Trace|Track|Trafficway|Tunnel|Turnpike|Underpass|Union|Unions|Valley|Valleys|Via|Viaduct|Views|Village|Villages|Ville|Vista|Walks|Wall|Ways|Well|Wells|Branch|Bridge|Brook|Brooks|Burg|Burgs|Camp|Canyon|Cape|Cliff|Cliffs|Club|Common|Commons|Corners|Course|Courts|Coves|Crest|Curve|Drives|Fall|Garden|Gateway|Glens|Greens|Groves|Harbors|Inlet|Junctions|Lane|Marg|Nagar|Road|Chowk|Gali|Bypass|Top|Side|End|Approach|Drove|Gate|Parade|Quay|Wharf|Wynd|Fold|Croft|Lea|Ley|Nook|Passage|Precinct|Promenade|Reach|Retreat|Access|Arcade|Brace|Brae|Break|Brow|Chase|Circuit|Concourse|Copse|Cross|Crossroad|Crossway|Dell|Deviation|Dip|Distributor|Driveway|Edge|Elbow|Entrance|Esplanade|Fairway|Firetrail|Follow|Footway|Foreshore|Formation|Front|Frontage|Gap|Gates|Glade|Grange|Ground|Gully|Highroad|Interchange|Intersection|Laneway|Lees|Line|Link|Lookout|Lower|Meander|Mew|Outlook|Parklands|Pathway|Plateau|Pocket|Quad|Quadrangle|Quadrant|Quays|Ramble|Range|Reserve|Ride|Ridgeway|Ring|Riverway|Riviera|Roads|Roadside|Roadway|Ronde|Rosebowl|Rotary|Round|Siding|Slope|Sound|Stairs|Steps|Strand|Strip|Subway|Tarn|Thoroughfare|Tollway|Tor|Towers|Trailer|Triangle|Trunkway|Turn|Upper|Vale|Villas|Wade|Walkway|Yard|Zila|Ganj|Peth|Extensions|Ports|Rapids|Unions";

/// Where an English-style street line may start: a house number followed by a capitalised
/// word, or "Flat/Unit/Studio/Apartment N".
fn street_starts(text: &str, kw: &Keywords) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for &(from, to) in &kw.digits {
        let mut i = from;
        while i < to {
            if !b[i].is_ascii_digit() || i > 0 && b[i - 1].is_ascii_alphanumeric() {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i - start > 6 {
                continue;
            }
            let mut j = i;
            if j < b.len() && b[j].is_ascii_alphabetic() {
                j += 1;
            }
            if j < b.len() && b[j] == b',' {
                j += 1;
            }
            let spaces = b[j..].iter().take_while(|&&c| c == b' ' || c == b'\t').count();
            if spaces > 0 && b.get(j + spaces).is_some_and(|c| c.is_ascii_uppercase() || *c >= 0x80) {
                out.push(start);
            }
        }
    }
    for &(a, _) in &kw.caps {
        let rest = &text[a..];
        if matches!(rest.as_bytes()[0], b'F' | b'U' | b'S' | b'A')
            && ["Flat ", "Unit ", "Studio ", "Apartment "].iter().any(|p| rest.starts_with(p))
        {
            out.push(a);
        }
    }
    out.sort_unstable();
    out
}
