"""The project's tests: tests/core, tests/cli and tests/studio follow core/, cli/ and studio/, tests/system the
whole; tests/helpers holds what they share (tiny models, the studio's test registry, browser and CLI helpers)."""
