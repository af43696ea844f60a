package binder

import "github.com/pvguard/pvguard/storage"

// AnnReuse forwards storage.AnnReuseWhenReleased to package explain, which still names it as the
// binder's. This file is removed once explain imports storage.
const AnnReuse = storage.AnnReuseWhenReleased
