fn main() {
    let d = solo_gate::Detector::new();
    let mut c = solo_gate::Conversation::new();
    let a = std::env::args().nth(1).unwrap();
    let b = std::env::args().nth(2).unwrap();
    println!("{:?}", c.scan(&d, &a));
    println!("{:?}", c.scan(&d, &b));
}
