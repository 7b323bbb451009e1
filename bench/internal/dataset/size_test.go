package dataset

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"64MiB", 64 << 20, true},
		{"1GiB", 1 << 30, true},
		{"100KiB", 100 << 10, true},
		{"4096", 4096, true},
		{"512B", 512, true},
		{"", 0, false},
		{"0MiB", 0, false},
		{"-1GiB", 0, false},
		{"1GB", 0, false},
		{"MiB", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok {
			if back, _ := ParseSize(FormatSize(got)); back != got {
				t.Errorf("FormatSize(%d) = %q does not parse back", got, FormatSize(got))
			}
		}
	}
}
