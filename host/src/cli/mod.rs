pub fn main(){}
