public class Hello {}
