#!/usr/bin/env perl
# The Perl harvester Debian ships (HTTP::OAI, libhttp-oai-perl): ListRecords
# through every resumption token (resume => 1), each record handed to a
# callback as it is parsed, its metadata taken. Prints records and seconds.
#   harvest.pl BASE_URL
use strict;
use warnings;
use HTTP::OAI;
use Time::HiRes qw(time);
my $t0 = time;
my $n = 0;
my $h = HTTP::OAI::Harvester->new(baseURL => $ARGV[0], resume => 1);
my $r = $h->ListRecords(metadataPrefix => 'oai_dc', onRecord => sub {
  my ($rec) = @_;
  my $md = $rec->metadata;
  $n++;
});
die $r->message if $r->is_error;
printf "%d %.2f\n", $n, time - $t0;
