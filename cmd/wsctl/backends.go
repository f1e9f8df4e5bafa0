package main

// The backends wsctl links. Each registers its DSN schemes in init.
import ()
