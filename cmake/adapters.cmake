# Adapter targets: header-only like the core, each linking its client library only when a
# consumer links the adapter target. An adapter whose client is not installed is skipped.
set(COMMIT_ORDER_INSTALLED_ADAPTERS "")
