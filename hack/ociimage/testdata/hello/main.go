// A stand-in for the Phalanx binaries in the image builder's test: it
// answers --version and --help as they do.
package main

import (
	"fmt"
	"os"
)

func main() {
	for _, a := range os.Args[1:] {
		switch a {
		case "--version":
			fmt.Println("hello v9.9.9 (commit feedface)")
			return
		case "--help":
			fmt.Println("Usage of hello")
			return
		}
	}
	os.Exit(2)
}
