"""Generic measurement (no agent knowledge): build profiles (`build_profile`), timers and interleaved
rounds (`timing`), the machine facts a result is recorded with (`machine`), Markdown tables (`tables`)
and the report file writer and plotting (`files`)."""
