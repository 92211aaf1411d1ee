//! The package of the compile-fail tests of the generated handler traits (`tests/ui`); it has
//! no code of its own, only the dependencies trybuild's cases are built with.
