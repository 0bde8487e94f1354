// The translation unit that builds the test suites' precompiled header (tests/CMakeLists.txt,
// dpscope_test_pch); every suite reuses that header. It has no code of its own.
