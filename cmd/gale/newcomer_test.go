package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// apacheLicenseSHA256 is the SHA-256 of the Apache License 2.0 as NATS ships it
// (nats.go, nkeys and nuid: the same file byte for byte), appendix included.
const apacheLicenseSHA256 = "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"

// The repository says under which terms it may be used: LICENSE is the Apache
// License 2.0, unchanged, and the README names it.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatalf("no LICENSE at the repository's root: %v", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 text unchanged: sha256 %x, want %s; it begins:\n%.200s", sum, apacheLicenseSHA256, b)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "Apache License 2.0") || !strings.Contains(string(readme), "(LICENSE)") {
		t.Errorf("the README does not name the Apache License 2.0 with a link to LICENSE")
	}
}
