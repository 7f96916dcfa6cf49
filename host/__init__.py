"""The harness: targets, probe deployment and execution, the results store, the CLI."""

KIT_VERSION = "0.1.0"
