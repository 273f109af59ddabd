package contextos

// Version is the version of this module's runtime. Packs declare the
// runtime versions they are compatible with; the CLI prints it.
const Version = "0.1.0-dev"
